/* tp_embed: the embedding lookup of a tensor-parallel rank whose table holds only its own
 * vocabulary rows — each rank writes the rows of the tokens it owns and zeros elsewhere, and
 * an all-reduce (sum) over the ranks gives every rank the whole [T, hidden] input. */
#include "engine/tp_impl.cuh"

/* x [T, hidden] fp32: row t = embed [tokens[t] - vocab0] when the token is in
 * [vocab0, vocab0 + n_vocab), else zeros. One block per token. */
static __global__ void embed_local_kernel(const __nv_bfloat16 *__restrict__ embed,
                                          const int32_t *__restrict__ tokens, float *__restrict__ x,
                                          int hidden, int vocab0, int n_vocab)
{
    int t = blockIdx.x;
    int v = tokens[t] - vocab0;
    float *xr = x + (size_t)t * hidden;
    if (v < 0 || v >= n_vocab) {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x)
            xr[i] = 0.f;
        return;
    }
    const __nv_bfloat16 *row = embed + (size_t)v * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        xr[i] = __bfloat162float(row[i]);
}

int sd__tp_embed(sd_tp_rank *t, const __nv_bfloat16 *embed, const int32_t *tokens, float *x, int T,
                 int hidden, cudaStream_t st, sd_diag *d)
{
    if (T <= 0)
        return 0;
    embed_local_kernel<<<T, 256, 0, st>>>(embed, tokens, x, hidden, t->plan.vocab0, t->plan.n_vocab);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ECUDA, "tensor parallel rank %d: embedding lookup: %s", t->plan.rank,
                           cudaGetErrorString(e));
    /* exactly one rank holds each token's row, so the fp32 sum is that row, bit for bit */
    return sd__tp_allreduce_sum(t, x, (size_t)T * hidden, st, d);
}
