/* dtype: tensor element types of checkpoints and their conversions to fp32. */
#ifndef SD_DTYPE_H
#define SD_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sd_dtype {
    SD_DT_INVALID = 0,
    SD_DT_BF16,
    SD_DT_F16,
    SD_DT_F32,
    SD_DT_F64,
    SD_DT_U8,
    SD_DT_I8,
    SD_DT_I16,
    SD_DT_I32,
    SD_DT_U32,
    SD_DT_I64,
    SD_DT_U64,
    SD_DT_BOOL,
} sd_dtype;

/* Size in bytes of one element; 0 for SD_DT_INVALID. */
size_t sd_dtype_size(sd_dtype dt);
/* The safetensors spelling ("BF16", "F32", ...). */
const char *sd_dtype_name(sd_dtype dt);
/* Parses a safetensors dtype string; SD_DT_INVALID if unknown. */
sd_dtype sd_dtype_parse(const char *s, size_t len);

static inline float sd_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round-to-nearest-even, NaN kept quiet; what torch does for .to(bfloat16). */
static inline uint16_t sd_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float sd_f16_to_f32(uint16_t h);
uint16_t sd_f32_to_f16(float f);

/* Converts n elements of a float dtype (BF16/F16/F32/F64) to fp32; other dtypes: -1. */
int sd_dtype_to_f32(sd_dtype dt, const void *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
