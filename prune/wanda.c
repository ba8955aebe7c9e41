/* wanda: Wanda and magnitude scores, the mask through sd_nm_mask_from_scores, and zeroing. */
#include "prune/wanda.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/nm_format.h"

int sd_wanda_prune(float *W, int64_t rows, int64_t cols, const double *xsq, int n, int m, uint32_t *keep,
                   sd_diag *d)
{
    if (rows <= 0 || cols <= 0 || cols % 32)
        return sd_diag_set(d, SD_EINVAL, "wanda: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
    float *scores = malloc((size_t)(rows * cols) * sizeof *scores); /* [rows, cols] */
    if (!scores)
        return sd_diag_set(d, SD_ENOMEM, "wanda: out of memory for [%lld, %lld] scores", (long long)rows,
                           (long long)cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) {
            double s = fabs((double)W[r * cols + j]);
            if (xsq)
                s *= sqrt(xsq[j] > 0 ? xsq[j] : 0);
            scores[r * cols + j] = (float)s;
        }
    int rc = sd_nm_mask_from_scores(scores, rows, cols, n, m, keep, d);
    free(scores);
    if (rc != 0)
        return rc;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            if (!(keep[r * (cols / 32) + j / 32] >> (j % 32) & 1u))
                W[r * cols + j] = 0;
    return 0;
}
