/* dtype: names, sizes and fp32 conversion of tensor element types. */
#include "dtype.h"

static const struct {
    sd_dtype dt;
    const char *name;
    size_t size;
} dtype_table[] = {
    {SD_DT_BF16, "BF16", 2}, {SD_DT_F16, "F16", 2}, {SD_DT_F32, "F32", 4}, {SD_DT_F64, "F64", 8},
    {SD_DT_U8, "U8", 1},     {SD_DT_I8, "I8", 1},   {SD_DT_I16, "I16", 2}, {SD_DT_I32, "I32", 4},
    {SD_DT_U32, "U32", 4},   {SD_DT_I64, "I64", 8}, {SD_DT_U64, "U64", 8}, {SD_DT_BOOL, "BOOL", 1},
};
#define N_DTYPES (sizeof dtype_table / sizeof dtype_table[0])

size_t sd_dtype_size(sd_dtype dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_table[i].dt == dt)
            return dtype_table[i].size;
    return 0;
}

const char *sd_dtype_name(sd_dtype dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_table[i].dt == dt)
            return dtype_table[i].name;
    return "INVALID";
}

sd_dtype sd_dtype_parse(const char *s, size_t len)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strlen(dtype_table[i].name) == len && memcmp(dtype_table[i].name, s, len) == 0)
            return dtype_table[i].dt;
    return SD_DT_INVALID;
}

float sd_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t sd_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xffu) - 127 + 15;
    uint32_t man = u & 0x7fffffu;
    if (((u >> 23) & 0xffu) == 0xffu)
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)h;
}

int sd_dtype_to_f32(sd_dtype dt, const void *src, float *dst, size_t n)
{
    const unsigned char *p = src;
    switch (dt) {
    case SD_DT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = sd_bf16_to_f32(h);
        }
        return 0;
    case SD_DT_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = sd_f16_to_f32(h);
        }
        return 0;
    case SD_DT_F32:
        memcpy(dst, src, n * 4);
        return 0;
    case SD_DT_F64:
        for (size_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, p + 8 * i, 8);
            dst[i] = (float)v;
        }
        return 0;
    default:
        return -1;
    }
}
