/* test_nm_gemm_layout: the N:M GEMM's shared-memory layout and fragment mapping
 * (kernels/nm_gemm_layout.h, the functions kernels/nm_gemm.cu calls) run on the CPU: a block's
 * stage is built as the kernel builds it (the raw values and masks copied unit by unit into the
 * stage, each thread's mask word read back from there and expanded by sd_nm_expand_word into the
 * swizzled weight tile, x's units into the x tile), every warp's ldmatrix.x4 and
 * mma.m16n8k16 emulated as the PTX ISA lays out their fragments, and the accumulators stored
 * where sd_gm_c_dst says; the result must be W x^T for every row and vector of the block, each
 * written once. Then whole problems (rows and vectors ending inside a block, fewer stages than
 * the pipeline holds, accumulation) through gm_kernel's schedule on a model of shared memory that
 * counts races: a read of bytes a cp.async may still be writing, or that another thread wrote
 * since the last barrier, and a write to bytes another thread read since then; schedules broken on
 * purpose must be caught. Runs without a GPU; test_nm_gemm_gpu checks the kernel itself on one. */
#include "tests/harness.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/nm_expand.h"
#include "kernels/nm_gemm_layout.h"
#include "tests/kernels/nm_test_util.h"

enum { ROWS = 128, COLS = 64, TILE = ROWS * COLS * 2, MAXV = 128 };

/* ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8; each lane receives, of every
 * matrix i, the bf16 pair at row lane / 4, columns 2 (lane % 4), + 1. */
static void ldsm_x4(const uint8_t *tile, const int addr[32], uint32_t r[32][4])
{
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++)
            memcpy(&r[l][i], tile + addr[8 * i + (l >> 2)] + 4 * (l & 3), 4);
}

static float lo(uint32_t w)
{
    return sd_bf16_to_f32((uint16_t)(w & 0xffff));
}

static float hi(uint32_t w)
{
    return sd_bf16_to_f32((uint16_t)(w >> 16));
}

/* mma.m16n8k16 (row, col), fp32 += bf16 x bf16: lane (g, t) = (l / 4, l % 4) holds A rows g, g + 8
 * at columns 2t, 2t + 1 (a0, a1) and 2t + 8, 2t + 9 (a2, a3); B (k x n) at k 2t, 2t + 1 (b0) and
 * 2t + 8, 2t + 9 (b1) of column g; C rows g (c0, c1) and g + 8 (c2, c3) at columns 2t, 2t + 1. */
static void mma(float c[32][4], const uint32_t a[32][4], const uint32_t b[32][2])
{
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int h = 0; h < 2; h++) { /* h: the k half */
            A[g][2 * t + 8 * h] = lo(a[l][2 * h]), A[g][2 * t + 8 * h + 1] = hi(a[l][2 * h]);
            A[g + 8][2 * t + 8 * h] = lo(a[l][2 * h + 1]), A[g + 8][2 * t + 8 * h + 1] = hi(a[l][2 * h + 1]);
            B[2 * t + 8 * h][g] = lo(b[l][h]), B[2 * t + 8 * h + 1][g] = hi(b[l][h]);
        }
    }
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int k = 0; k < 4; k++) {
            const int row = g + 8 * (k >> 1), col = 2 * t + (k & 1);
            float s = 0;
            for (int j = 0; j < 16; j++)
                s += A[row][j] * B[j][col];
            c[l][k] += s;
        }
    }
}

/* One block stage of pattern n:m with 8 wn_tiles vectors a warp (wn_tiles 2 or 4). */
static void check_stage(int n, int m, int wn_tiles, uint64_t seed)
{
    const int nvec = 32 * wn_tiles;
    static uint16_t w[ROWS * COLS], vals[ROWS * COLS / 2], x[MAXV * COLS], wd[ROWS * COLS];
    static uint32_t mask[ROWS * COLS / 32];
    static uint8_t at[TILE], xt[MAXV * COLS * 2], raw[SD_GM_RAW_BYTES];
    static float out[ROWS][MAXV];
    static int written[ROWS][MAXV];
    uint64_t s = seed;
    nmt_fill_bf16(w, ROWS * COLS, &s);
    nmt_fill_bf16(x, nvec * COLS, &s);
    REQUIRE(nmt_random_mask(mask, ROWS, COLS, n, m, &s) == 0);
    REQUIRE(sd_nm_pack(w, mask, ROWS, COLS, vals, mask, NULL) == 0);
    REQUIRE(sd_nm_expand(vals, mask, ROWS, COLS, wd) == 0); /* the pruned weight: the reference's */
    memset(at, 0xff, sizeof at);
    memset(xt, 0xff, sizeof xt);
    memset(raw, 0xff, sizeof raw);
    for (int i = 0; i < 512; i++) { /* issue_w's copies: values unit by unit, then each row's mask */
        int r, u;
        sd_gm_raw_unit(i, &r, &u);
        memcpy(raw + sd_gm_raw_val_off(r, u), vals + r * (COLS / 2) + 8 * u, 16);
    }
    for (int r = 0; r < ROWS; r++)
        memcpy(raw + sd_gm_raw_mask_off(r), mask + r * (COLS / 32), 8);
    for (int t = 0; t < 256; t++) { /* the expansion: thread t's word, read back from the stage */
        int vo, mo;
        uint32_t v[8], o[16], mw;
        sd_gm_raw_word(t, &vo, &mo);
        memcpy(v, raw + vo, 32);
        memcpy(&mw, raw + mo, 4);
        sd_nm_expand_word(mw, v, o);
        for (int q = 0; q < 4; q++) {
            int r, u;
            sd_gm_w_unit(t, q, &r, &u);
            memcpy(at + sd_gm_unit_off(r, u), o + 4 * q, 16);
        }
    }
    for (int v = 0; v < nvec; v++) /* x's units, as the cp.async of issue_x place them */
        for (int u = 0; u < 8; u++)
            memcpy(xt + sd_gm_unit_off(v, u), x + v * COLS + 8 * u, 16);
    memset(written, 0, sizeof written);
    for (int warp = 0; warp < 8; warp++) {
        const int wm = warp & 1, v0 = 8 * wn_tiles * (warp >> 1);
        float c[4][4][32][4];
        memset(c, 0, sizeof c);
        for (int kk = 0; kk < 4; kk++)
            for (int mt = 0; mt < 4; mt++) {
                int addr[32];
                uint32_t a[32][4];
                for (int l = 0; l < 32; l++) {
                    int r, u;
                    sd_gm_a_src(wm, mt, kk, l, &r, &u);
                    addr[l] = sd_gm_unit_off(r, u);
                }
                ldsm_x4(at, addr, a);
                for (int np = 0; np < wn_tiles / 2; np++) {
                    uint32_t b4[32][4], b[32][2];
                    for (int l = 0; l < 32; l++) {
                        int v, u;
                        sd_gm_b_src(v0, np, kk, l, &v, &u);
                        addr[l] = sd_gm_unit_off(v, u);
                    }
                    ldsm_x4(xt, addr, b4);
                    for (int half = 0; half < 2; half++) {
                        for (int l = 0; l < 32; l++)
                            b[l][0] = b4[l][2 * half], b[l][1] = b4[l][2 * half + 1];
                        mma(c[mt][2 * np + half], a, b);
                    }
                }
            }
        for (int mt = 0; mt < 4; mt++)
            for (int nt = 0; nt < wn_tiles; nt++)
                for (int l = 0; l < 32; l++)
                    for (int k = 0; k < 4; k++) {
                        int row, vec;
                        sd_gm_c_dst(wm, v0, mt, nt, k, l, &row, &vec);
                        REQUIRE(row >= 0 && row < ROWS && vec >= 0 && vec < nvec);
                        out[row][vec] = c[mt][nt][l][k];
                        written[row][vec]++;
                    }
    }
    int bad = 0, twice = 0;
    for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < nvec; v++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < COLS; k++) {
                const double p = (double)sd_bf16_to_f32(wd[r * COLS + k]) * sd_bf16_to_f32(x[v * COLS + k]);
                ref += p;
                mag += fabs(p);
            }
            twice += written[r][v] != 1;
            bad += !(fabs(out[r][v] - ref) <= 1e-5 * mag + 1e-6);
        }
    CHECK_MSG(!bad && !twice, "%d:%d, %d vectors: %d outputs wrong, %d not written once", n, m, nvec, bad,
              twice);
}

static void test_stage_every_pattern(void)
{
    const int pats[4][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}};
    for (int p = 0; p < 4; p++)
        for (int wn = 2; wn <= 4; wn += 2)
            check_stage(pats[p][0], pats[p][1], wn, 31u + 7u * (uint64_t)p + (uint64_t)wn);
}

/* The swizzle: the 8 rows of an ldmatrix phase (rows r0 .. r0 + 7 at one unit) and the 8 units of
 * an expansion store phase (threads 8 p .. 8 p + 7 at one q) land in 8 distinct bank groups. */
static void test_conflict_free(void)
{
    for (int r0 = 0; r0 < ROWS; r0 += 8)
        for (int u = 0; u < 8; u++) {
            int seen = 0;
            for (int i = 0; i < 8; i++)
                seen |= 1 << ((sd_gm_unit_off(r0 + i, u) / 16) & 7);
            CHECK_MSG(seen == 0xff, "ldmatrix rows %d.. unit %d: bank groups %#x", r0, u, seen);
        }
    for (int p = 0; p < 32; p++)
        for (int q = 0; q < 4; q++) {
            int seen = 0;
            for (int i = 0; i < 8; i++) {
                int r, u;
                sd_gm_w_unit(8 * p + i, q, &r, &u);
                seen |= 1 << ((sd_gm_unit_off(r, u) / 16) & 7);
            }
            CHECK_MSG(seen == 0xff, "expansion threads %d.. quarter %d: bank groups %#x", 8 * p, q, seen);
        }
}

/* Shared memory as gm_kernel uses it, in 4-byte cells, with what the race check needs: per cell
 * the barrier interval (epoch) and thread of the last write and read (-1: a cp.async; -2: several
 * readers), the cp.async group writing it (-1: none in flight) and the epoch from which what a
 * copy wrote may be read (the one after the wait that completed it: the barrier that follows makes
 * it everyone's). A copy's bytes are poisoned at issue and land at the wait that completes its
 * group, so a read too early also reads wrong numbers. */
enum { THREADS = 256, MAXCP = 8192 };

typedef struct {
    int bytes, epoch, committed, races, ncp;
    uint8_t sm[SD_GM_SMEM_BYTES(MAXV)];
    int wr_ep[SD_GM_SMEM_BYTES(MAXV) / 4], wr_th[SD_GM_SMEM_BYTES(MAXV) / 4];
    int rd_ep[SD_GM_SMEM_BYTES(MAXV) / 4], rd_th[SD_GM_SMEM_BYTES(MAXV) / 4];
    int pend[SD_GM_SMEM_BYTES(MAXV) / 4], vis[SD_GM_SMEM_BYTES(MAXV) / 4];
    struct {
        int dst, len, group;
        uint8_t data[16];
    } cp[MAXCP];
} smem_model;

static void sm_reset(smem_model *m, int bytes)
{
    m->bytes = bytes, m->epoch = 0, m->committed = 0, m->ncp = 0;
    memset(m->sm, 0xff, sizeof m->sm);
    for (int c = 0; c < bytes / 4; c++)
        m->wr_ep[c] = m->rd_ep[c] = m->pend[c] = -1, m->vis[c] = 0;
}

/* Whether [off, off + len) lies in the block's shared memory, aligned as the access needs (the
 * test fails if not, and the access is dropped). */
static int sm_range(const smem_model *m, int off, int len, int align)
{
    const int ok = off >= 0 && len > 0 && off + len <= m->bytes && off % align == 0 && len % 4 == 0;
    CHECK_MSG(ok, "shared access at %d, %d bytes, outside %d or not aligned to %d", off, len, m->bytes,
              align);
    return ok;
}

static void sm_read(smem_model *m, int off, int len, int th, void *out)
{
    if (!sm_range(m, off, len, len >= 16 ? 16 : 4))
        return;
    for (int c = off / 4; c < (off + len) / 4; c++) {
        m->races += m->pend[c] >= 0 || m->vis[c] > m->epoch || (m->wr_ep[c] == m->epoch && m->wr_th[c] != th);
        m->rd_th[c] = m->rd_ep[c] == m->epoch && m->rd_th[c] != th ? -2 : th;
        m->rd_ep[c] = m->epoch;
    }
    memcpy(out, m->sm + off, (size_t)len);
}

static void sm_write(smem_model *m, int off, int len, int th, const void *src)
{
    if (!sm_range(m, off, len, 16))
        return;
    for (int c = off / 4; c < (off + len) / 4; c++) {
        m->races += m->pend[c] >= 0 || m->vis[c] > m->epoch ||
                    (m->wr_ep[c] == m->epoch && m->wr_th[c] != th) ||
                    (m->rd_ep[c] == m->epoch && m->rd_th[c] != th);
        m->wr_ep[c] = m->epoch, m->wr_th[c] = th;
    }
    memcpy(m->sm + off, src, (size_t)len);
}

/* cp.async of len bytes from src (NULL: src-size 0, zeros) into the open group. Conservative: any
 * read of the bytes since the last barrier, even the issuing thread's own, is a race (the copy is
 * not ordered after the thread's earlier loads). */
static void sm_async(smem_model *m, int off, int len, int th, const void *src)
{
    if (!sm_range(m, off, len, len))
        return;
    REQUIRE(m->ncp < MAXCP);
    for (int c = off / 4; c < (off + len) / 4; c++) {
        m->races +=
            m->pend[c] >= 0 || (m->wr_ep[c] == m->epoch && m->wr_th[c] != th) || m->rd_ep[c] == m->epoch;
        m->pend[c] = m->committed;
    }
    m->cp[m->ncp].dst = off, m->cp[m->ncp].len = len, m->cp[m->ncp].group = m->committed;
    if (src)
        memcpy(m->cp[m->ncp].data, src, (size_t)len);
    else
        memset(m->cp[m->ncp].data, 0, (size_t)len);
    m->ncp++;
    memset(m->sm + off, 0xff, (size_t)len);
}

static void sm_commit(smem_model *m)
{
    m->committed++;
}

/* cp.async.wait_group n: every group but the newest n has landed. */
static void sm_wait(smem_model *m, int n)
{
    int kept = 0;
    for (int i = 0; i < m->ncp; i++) {
        if (m->cp[i].group >= m->committed - n) {
            m->cp[kept++] = m->cp[i];
            continue;
        }
        memcpy(m->sm + m->cp[i].dst, m->cp[i].data, (size_t)m->cp[i].len);
        for (int c = m->cp[i].dst / 4; c < (m->cp[i].dst + m->cp[i].len) / 4; c++)
            m->pend[c] = -1, m->vis[c] = m->epoch + 1, m->wr_ep[c] = m->epoch, m->wr_th[c] = -1;
    }
    m->ncp = kept;
}

static void sm_barrier(smem_model *m)
{
    m->epoch++;
}

/* A problem in global memory, with the element counts of its arrays (the copies' bounds). */
typedef struct {
    int n, m, nvec, B, acc;
    int64_t rows, cols, ldx, ldy, nvals, nmask, nx;
    const uint16_t *vals, *x;
    const uint32_t *mask;
    float *y;
    int oob, misaligned, twice;
    int *written; /* [B, ldy] */
} gm_prob;

/* gm_kernel's schedule broken on purpose (0: as the kernel runs): the race check must see each. */
enum { MUT_NONE, MUT_WAIT_LESS, MUT_NO_BARRIER, MUT_SAME_TILE, MUT_ISSUE_AHEAD, MUT_COUNT };

/* A copy's source: base + off elements (esz bytes each) for len elements, NULL when !ok (src-size
 * 0: zeros); counts sources outside the array (then copies zeros) or not aligned to the copy. */
static const void *src_of(gm_prob *p, const void *base, int64_t off, int64_t len, int64_t count, int esz,
                          int ok)
{
    if (!ok)
        return NULL;
    p->oob += off < 0 || off + len > count;
    p->misaligned += (off * esz) % (len * esz) != 0;
    return off < 0 || off + len > count ? NULL : (const uint8_t *)base + off * esz;
}

/* issue_stage<WN>: stage s's values, masks and x into its slot (s < n), then one commit. */
static void issue_stage(smem_model *m, gm_prob *p, int64_t row0, int64_t v0, int s, int n)
{
    if (s < n) {
        const int st = sd_gm_slot_off(s, p->nvec);
        for (int t = 0; t < THREADS; t++) {
            for (int j = 0; j < 2; j++) {
                int r, u;
                sd_gm_raw_unit(t + THREADS * j, &r, &u);
                const int64_t row = row0 + r;
                sm_async(
                    m, st + sd_gm_raw_val_off(r, u), 16, t,
                    src_of(p, p->vals, sd_gm_val_src(row, p->cols, s, u), 8, p->nvals, 2, row < p->rows));
            }
            if (t < ROWS)
                sm_async(m, st + sd_gm_raw_mask_off(t), 8, t,
                         src_of(p, p->mask, sd_gm_mask_src(row0 + t, p->cols, s), 2, p->nmask, 4,
                                row0 + t < p->rows));
            for (int j = 0; j < p->nvec / 32; j++) {
                int v, u;
                sd_gm_x_unit(t, j, &v, &u);
                REQUIRE(v >= 0 && v < p->nvec && u >= 0 && u < 8);
                sm_async(m, st + SD_GM_RAW_BYTES + sd_gm_unit_off(v, u), 16, t,
                         src_of(p, p->x, sd_gm_x_src(v0 + v, p->ldx, s, u), 8, p->nx, 2, v0 + v < p->B));
            }
        }
    }
    sm_commit(m);
}

/* store_w: every thread's word of the stage at st expanded into the tile at a. */
static void store_w(smem_model *m, int st, int a)
{
    for (int t = 0; t < THREADS; t++) {
        int vo, mo;
        uint32_t v[8], o[16], mw;
        sd_gm_raw_word(t, &vo, &mo);
        sm_read(m, st + vo, 32, t, v);
        sm_read(m, st + mo, 4, t, &mw);
        sd_nm_expand_word(mw, v, o);
        for (int q = 0; q < 4; q++) {
            int r, u;
            sd_gm_w_unit(t, q, &r, &u);
            sm_write(m, a + sd_gm_unit_off(r, u), 16, t, o + 4 * q);
        }
    }
}

/* ldmatrix.x4 of warp w through the model: lane l reads the 16 bytes at base + addr[l]. */
static void ldsm_m(smem_model *m, int base, const int addr[32], int w, uint32_t r[32][4])
{
    uint32_t row[32][4];
    for (int l = 0; l < 32; l++)
        sm_read(m, base + addr[l], 16, 32 * w + l, row[l]);
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++)
            r[l][i] = row[8 * i + (l >> 2)][l & 3];
}

static float acc_c[8][4][4][32][4]; /* [warp][m][n][lane][k] */

/* mma_stage<WN>: every warp's four k16 steps on the tile at a and the x stage at xs. */
static void mma_stage(smem_model *m, int a, int xs, int wn)
{
    for (int w = 0; w < 8; w++) {
        const int wm = w & 1, v0 = 8 * wn * (w >> 1);
        for (int kk = 0; kk < 4; kk++)
            for (int mt = 0; mt < 4; mt++) {
                int addr[32];
                uint32_t fa[32][4];
                for (int l = 0; l < 32; l++) {
                    int r, u;
                    sd_gm_a_src(wm, mt, kk, l, &r, &u);
                    addr[l] = sd_gm_unit_off(r, u);
                }
                ldsm_m(m, a, addr, w, fa);
                for (int np = 0; np < wn / 2; np++) {
                    uint32_t b4[32][4], b[32][2];
                    for (int l = 0; l < 32; l++) {
                        int v, u;
                        sd_gm_b_src(v0, np, kk, l, &v, &u);
                        addr[l] = sd_gm_unit_off(v, u);
                    }
                    ldsm_m(m, xs, addr, w, b4);
                    for (int half = 0; half < 2; half++) {
                        for (int l = 0; l < 32; l++)
                            b[l][0] = b4[l][2 * half], b[l][1] = b4[l][2 * half + 1];
                        mma(acc_c[w][mt][2 * np + half], fa, b);
                    }
                }
            }
    }
}

/* store_c<WN>: each warp's accumulators where sd_gm_c_dst says, inside the problem only. */
static void store_c(gm_prob *p, int64_t row0, int64_t v0, int wn)
{
    for (int w = 0; w < 8; w++)
        for (int mt = 0; mt < 4; mt++)
            for (int nt = 0; nt < wn; nt++)
                for (int l = 0; l < 32; l++)
                    for (int k = 0; k < 4; k++) {
                        int r, v;
                        sd_gm_c_dst(w & 1, 8 * wn * (w >> 1), mt, nt, k, l, &r, &v);
                        const int64_t row = row0 + r, vec = v0 + v;
                        if (row >= p->rows || vec >= p->B)
                            continue;
                        float *o = p->y + vec * p->ldy + row;
                        *o = p->acc ? *o + acc_c[w][mt][nt][l][k] : acc_c[w][mt][nt][l][k];
                        p->twice += p->written[vec * p->ldy + row]++ != 0;
                    }
}

/* One block of gm_kernel<WN> (p->nvec = 32 WN), as the kernel orders it; mut breaks it. */
static void run_block(smem_model *m, gm_prob *p, int64_t row0, int64_t v0, int mut)
{
    const int n = (int)(p->cols / COLS), wn = p->nvec / 32;
    sm_reset(m, SD_GM_SMEM_BYTES(p->nvec));
    memset(acc_c, 0, sizeof acc_c);
    for (int s = 0; s < SD_GM_STAGES - 1 + (mut == MUT_ISSUE_AHEAD); s++)
        issue_stage(m, p, row0, v0, s, n);
    sm_wait(m, SD_GM_WAIT + 1 + (mut == MUT_ISSUE_AHEAD));
    sm_barrier(m);
    store_w(m, sd_gm_slot_off(0, p->nvec), sd_gm_tile_off(0));
    for (int k = 0; k < n; k++) {
        sm_wait(m, SD_GM_WAIT + (mut == MUT_WAIT_LESS));
        if (mut != MUT_NO_BARRIER)
            sm_barrier(m);
        issue_stage(m, p, row0, v0, sd_gm_issue_stage(k) + (mut == MUT_ISSUE_AHEAD), n);
        if (k + 1 < n)
            store_w(m, sd_gm_slot_off(k + 1, p->nvec), sd_gm_tile_off(k + 1 + (mut == MUT_SAME_TILE)));
        mma_stage(m, sd_gm_tile_off(k), sd_gm_slot_off(k, p->nvec) + SD_GM_RAW_BYTES, wn);
    }
    sm_wait(m, 0);
    store_c(p, row0, v0, wn);
}

/* A whole problem through the kernel's blocks; *seen: the races the model saw plus the outputs
 * wrong. Unbroken (mut 0), checks every output against fp64 W x^T (+ y0; corrupt: masks of any bit
 * count, bounds only), each written once, y's padding untouched, no race. */
static void run_problem(int n, int m, int64_t rows, int64_t cols, int B, int wn, int acc, int corrupt,
                        int mut, uint64_t seed, int *seen)
{
    static smem_model model;
    gm_prob p = {.n = n,
                 .m = m,
                 .nvec = 32 * wn,
                 .B = B,
                 .acc = acc,
                 .rows = rows,
                 .cols = cols,
                 .ldx = cols + 8,
                 .ldy = rows + 3,
                 .nvals = rows * cols / 2,
                 .nmask = rows * cols / 32,
                 .nx = (int64_t)B * (cols + 8)};
    *seen = 0;
    uint16_t *w = malloc((size_t)(rows * cols) * 2), *vals = malloc((size_t)p.nvals * 2),
             *x = malloc((size_t)p.nx * 2), *wd = malloc((size_t)(rows * cols) * 2);
    uint32_t *mask = malloc((size_t)p.nmask * 4);
    float *y = malloc((size_t)B * p.ldy * 4), *y0 = malloc((size_t)B * p.ldy * 4);
    p.written = calloc((size_t)B * p.ldy, sizeof *p.written);
    REQUIRE(w && vals && x && wd && mask && y && y0 && p.written);
    uint64_t s = seed;
    nmt_fill_bf16(w, rows * cols, &s);
    nmt_fill_bf16(x, p.nx, &s);
    if (corrupt) {
        nmt_fill_bf16(vals, p.nvals, &s);
        for (int64_t i = 0; i < p.nmask; i++) /* every popcount from 0 to 32 */
            mask[i] = i % 3 == 0 ? (uint32_t)nmt_rand(&s) : i % 3 == 1 ? 0xffffffffu : 0u;
    } else {
        REQUIRE(nmt_random_mask(mask, rows, cols, n, m, &s) == 0);
        REQUIRE(sd_nm_pack(w, mask, rows, cols, vals, mask, NULL) == 0);
        REQUIRE(sd_nm_expand(vals, mask, rows, cols, wd) == 0);
    }
    for (int64_t i = 0; i < (int64_t)B * p.ldy; i++)
        y[i] = y0[i] = i % p.ldy < rows && acc ? nmt_uniform(&s) : NAN;
    p.vals = vals, p.mask = mask, p.x = x, p.y = y;
    int races = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS)
        for (int64_t v0 = 0; v0 < B; v0 += p.nvec) {
            run_block(&model, &p, r0, v0, mut);
            races += model.races;
            CHECK_MSG(model.ncp == 0, "copies left in flight: %d", model.ncp);
        }
    CHECK_MSG(!p.oob && !p.misaligned, "%lldx%lld: %d copies out of bounds, %d misaligned", (long long)rows,
              (long long)cols, p.oob, p.misaligned);
    int bad = 0, unwritten = 0, pad = 0;
    for (int b = 0; b < B; b++)
        for (int64_t r = 0; r < p.ldy; r++) {
            const int64_t i = b * p.ldy + r;
            if (r >= rows) {
                pad += !isnan(y[i]) || p.written[i];
                continue;
            }
            unwritten += p.written[i] != 1;
            if (corrupt)
                continue;
            double ref = acc ? y0[i] : 0.0, mag = fabs(ref);
            for (int64_t k = 0; k < cols; k++) {
                const double t = (double)sd_bf16_to_f32(wd[r * cols + k]) * sd_bf16_to_f32(x[b * p.ldx + k]);
                ref += t;
                mag += fabs(t);
            }
            bad += !(fabs(y[i] - ref) <= 1e-5 * mag + 1e-6);
        }
    if (mut == MUT_NONE)
        CHECK_MSG(!races && !bad && !unwritten && !pad && !p.twice,
                  "%d:%d %lldx%lld B=%d tile %d acc %d corrupt %d: %d races, %d wrong, %d not written once, "
                  "%d padding written",
                  n, m, (long long)rows, (long long)cols, B, 32 * wn, acc, corrupt, races, bad,
                  unwritten + p.twice, pad);
    free(w), free(vals), free(x), free(wd), free(mask), free(y), free(y0), free(p.written);
    *seen = races + bad;
}

/* Every pattern; rows and vectors that end inside a block; 1 and 2 stages (fewer than the
 * prologue issues), 5 and 6 (the slots wrap); both vector tiles; accumulation. */
static void test_kernel_schedule(void)
{
    static const struct {
        int n, m;
        int64_t rows, cols;
        int B, wn, acc;
    } cases[] = {{2, 4, 165, 384, 77, 2, 0},    {4, 8, 128, 64, 64, 2, 1},  {8, 16, 37, 128, 130, 4, 0},
                 {16, 32, 200, 320, 129, 4, 1}, {2, 4, 130, 192, 65, 4, 1}, {8, 16, 1, 256, 1, 2, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int seen;
        run_problem(cases[i].n, cases[i].m, cases[i].rows, cases[i].cols, cases[i].B, cases[i].wn,
                    cases[i].acc, 0, MUT_NONE, 900 + i, &seen);
    }
}

/* A mask of any bit count gives wrong numbers, never a copy or an expansion out of bounds (the
 * ASan build of this test watches the expansion's reads) nor a race. */
static void test_corrupt_mask(void)
{
    int seen;
    run_problem(2, 4, 150, 256, 70, 2, 0, 1, MUT_NONE, 950, &seen);
    run_problem(16, 32, 64, 128, 130, 4, 1, 1, MUT_NONE, 951, &seen);
}

/* The race check is worth something only if it sees a broken schedule: a wait for one group
 * fewer (stage k + 1 may not have landed), no barrier (the slot and tile of iteration k - 1 are
 * reused under other warps), stage k + 1 expanded into the tile stage k is read from, a stage
 * issued one further ahead (into the slot still being read). */
static void test_race_check_sees_broken_schedules(void)
{
    for (int mut = MUT_WAIT_LESS; mut < MUT_COUNT; mut++) {
        int seen = 0;
        run_problem(4, 8, 128, 320, 64, 2, 0, 0, mut, 960 + mut, &seen);
        CHECK_MSG(seen > 0, "schedule mutation %d: no race or wrong output seen", mut);
    }
}

/* sd_gm_shape_ok (sd_nm_gemm_supported's shape test) admits only shapes whose every copy source
 * is aligned as cp.async needs (values and x 16 bytes, masks 8) when the bases are. */
static void test_shape_ok_aligned(void)
{
    for (int64_t cols = 32; cols <= 4160; cols += 32)
        for (int64_t dx = 0; dx <= 12; dx += 4) {
            const int64_t ldx = cols + dx;
            const int ok = sd_gm_shape_ok(8, 16, cols, ldx);
            CHECK_MSG(ok == (cols % 64 == 0 && ldx % 8 == 0), "cols %lld ldx %lld: shape_ok %d",
                      (long long)cols, (long long)ldx, ok);
            if (!ok)
                continue;
            int bad = 0;
            for (int64_t row = 0; row < 3; row++)
                for (int s = 0; s < cols / COLS; s++)
                    for (int u = 0; u < 8; u++) {
                        bad += u < 4 && sd_gm_val_src(row, cols, s, u) * 2 % 16 != 0;
                        bad += sd_gm_mask_src(row, cols, s) * 4 % 8 != 0;
                        bad += sd_gm_x_src(row, ldx, s, u) * 2 % 16 != 0;
                    }
            CHECK_MSG(!bad, "cols %lld ldx %lld: %d sources misaligned", (long long)cols, (long long)ldx,
                      bad);
        }
    CHECK(!sd_gm_shape_ok(8, 16, 4128, 4128) && sd_gm_mask_src(1, 4128, 0) * 4 % 8 != 0);
    CHECK(!sd_gm_shape_ok(0, 0, 4096, 4096) && !sd_gm_shape_ok(3, 8, 4096, 4096) &&
          !sd_gm_shape_ok(8, 16, 4096, 4088));
}

int main(void)
{
    RUN(test_stage_every_pattern);
    RUN(test_conflict_free);
    RUN(test_kernel_schedule);
    RUN(test_corrupt_mask);
    RUN(test_race_check_sees_broken_schedules);
    RUN(test_shape_ok_aligned);
    return sd_test_done();
}
