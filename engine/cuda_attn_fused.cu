/* cuda_attn_fused: the SD_ATTN_FUSED switch of the fused q/k/v post-processing + decode attention
 * (the kernel is in engine/cuda_attn_decode.cu) and the C entry that runs it, or the two kernels
 * it replaces, for tests. */
#include "engine/cuda_impl.cuh"

#include "engine/cuda_attn_fused.h"

#include <stdlib.h>
#include <string.h>

extern "C" int sd_cu_attn_fused_enabled(void)
{
    const char *e = getenv("SD_ATTN_FUSED");
    return !(e && !strcmp(e, "0"));
}

extern "C" int sd_cu_attn_cluster_mode(void)
{
    const char *e = getenv("SD_ATTN_CLUSTER");
    if (e && !strcmp(e, "0"))
        return SD_ATTN_CLUSTER_NEVER;
    return e && !strcmp(e, "2") ? SD_ATTN_CLUSTER_ALWAYS : SD_ATTN_CLUSTER_PAYS;
}

extern "C" int sd_cu_attn_early(void)
{
    const char *e = getenv("SD_ATTN_EARLY");
    return !(e && !strcmp(e, "0"));
}

extern "C" int sd_cu_attn_fused_test_run(int fused, const sd_cu_fused_test *t, sd_diag *d)
{
    if (fused != 0 && fused != 1)
        return sd_diag_set(d, SD_EINVAL, "fused attention test: mode %d", fused);
    __nv_bfloat16 *kc = (__nv_bfloat16 *)t->k_cache, *vc = (__nv_bfloat16 *)t->v_cache;
    sd_cu_qkv_args p = {t->qkv,     t->bias,         t->q_norm, t->k_norm,     t->inv_freq, t->tok_pos,
                        t->tok_seq, t->block_tables, t->max_bt, t->block_size, t->T,        t->n_heads,
                        t->n_kv,    t->head_dim,     t->eps,    t->q,          kc,          vc};
    sd_cu_attn_args a = sd__cu_attn_test_args(t);
    a.cluster = t->cluster; /* NEVER or ALWAYS: sms matters only to PAYS */
    a.early = t->early;
    if (!fused) {
        SD_TRY(sd__cu_qkv_post(&p, 0, 0, d));
        return sd__cu_attention(&a, 0, 0, d);
    }
    if (t->k_write)
        p.k_cache = (__nv_bfloat16 *)t->k_write;
    if (t->v_write)
        p.v_cache = (__nv_bfloat16 *)t->v_write;
    return sd__cu_attn_fused(&p, &a, 0, 0, d);
}
