/* cuda_linear: y = x W^T for the CUDA backend's linears. Prefill and large batches: cuBLAS
 * bf16 GEMM (bitmask weights expanded into a dense scratch first). */
#include "engine/cuda_impl.cuh"

#include <string.h>

static size_t linear_elems(const sd_cu_linear *l)
{
    return l->bitmask ? (size_t)l->rows * (size_t)l->cols : 0;
}

int sd__cu_mm_init(sd_cu_mm *mm, const sd_cu_weights *w, cudaStream_t st, sd_diag *d)
{
    memset(mm, 0, sizeof *mm);
    size_t need = linear_elems(&w->lm_head);
    for (int i = 0; i < w->n_layers; i++) {
        const sd_cu_layer *l = &w->layers[i];
        const sd_cu_linear *ls[4] = {&l->qkv, &l->o, &l->gate_up, &l->down};
        for (int k = 0; k < 4; k++)
            if (linear_elems(ls[k]) > need)
                need = linear_elems(ls[k]);
    }
    if (need) {
        SD_CU(d, cudaMalloc((void **)&mm->scratch, need * 2));
        mm->scratch_elems = need;
    }
    SD_CUBLAS(d, cublasCreate(&mm->blas));
    mm->blas_ws_bytes = 32u << 20;
    SD_CU(d, cudaMalloc(&mm->blas_ws, mm->blas_ws_bytes));
    SD_CUBLAS(d, cublasSetStream(mm->blas, st));
    SD_CUBLAS(d, cublasSetWorkspace(mm->blas, mm->blas_ws, mm->blas_ws_bytes));
    return 0;
}

void sd__cu_mm_free(sd_cu_mm *mm)
{
    if (!mm)
        return;
    if (mm->blas)
        cublasDestroy(mm->blas);
    cudaFree(mm->blas_ws);
    cudaFree(mm->scratch);
    memset(mm, 0, sizeof *mm);
}

int sd__cu_linear(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T,
                  cudaStream_t st, sd_diag *d)
{
    const __nv_bfloat16 *w = l->w;
    if (l->bitmask) {
        SD_TRY(sd__cu_expand_bitmask(l->values, l->mask, mm->scratch, l->rows, l->cols, st, d));
        w = mm->scratch;
    }
    /* row-major Y[T, rows] = X[T, cols] W[rows, cols]^T is column-major Y^T = W^T' X^T' */
    const float one = 1.f, zero = 0.f;
    SD_CUBLAS(d, cublasGemmEx(mm->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)l->rows, T, (int)l->cols, &one, w,
                              CUDA_R_16BF, (int)l->cols, in, CUDA_R_16BF, (int)l->cols, &zero, out,
                              CUDA_R_32F, (int)l->rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}
