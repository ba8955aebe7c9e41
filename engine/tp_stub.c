/* tp_stub: the tensor-parallel entry points of builds without CUDA (engine/tp.cu is the real
 * one): every constructor says it is not supported. */
#include "tp.h"

#include <string.h>

#ifndef SD_HAVE_CUDA
void sd_tp_opts_default(sd_tp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->world = 1;
    o->rank = -1;
    o->timeout_ms = 120000;
}

static int no_cuda(sd_diag *d)
{
    return sd_diag_set(d, SD_ENOTSUP, "tensor parallel: this build has no CUDA");
}

int sd_tp_backend_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *bo, const sd_tp_opts *o,
                       sd_diag *d)
{
    return no_cuda(d);
}

int sd_tp_backend_init_synthetic(sd_backend **ret, const sd_model_config *cfg, const char *pattern,
                                 uint64_t seed, const sd_backend_opts *bo, const sd_tp_opts *o, sd_diag *d)
{
    return no_cuda(d);
}

int sd_tp_follow(sd_backend *b, sd_diag *d)
{
    return no_cuda(d);
}

int sd_tp_is_tp(const sd_backend *b)
{
    return 0;
}

int sd_tp_failed(const sd_backend *b)
{
    return 0;
}

const sd_backend *sd_tp_local_rank(const sd_backend *b)
{
    return NULL;
}
#else
typedef int sd__tp_stub_unused; /* the CUDA build uses engine/tp.cu */
#endif
