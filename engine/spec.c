/* spec: the prompt-lookup draft proposer (see spec.h). */
#include "spec.h"

int32_t sd_spec_ngram(const int32_t *hist, int32_t n, int ngram_min, int ngram_max, int32_t max_out,
                      int32_t *out)
{
    if (max_out <= 0 || ngram_min < 1 || ngram_max < ngram_min || n < ngram_min + 1)
        return 0;
    if (ngram_max > n - 1)
        ngram_max = n - 1;
    /* Candidates end at j (hist[j] == hist[n - 1], j < n - 1), newest first; the match length
     * is how far hist[.. j] and hist[.. n - 1] agree backwards. The first candidate that reaches
     * ngram_max wins at once; otherwise the longest seen (newest among equals). */
    int32_t best_j = -1;
    int best_len = 0;
    const int32_t last = hist[n - 1];
    for (int32_t j = n - 2; j >= 0; j--) {
        if (hist[j] != last)
            continue;
        int len = 1;
        while (len < ngram_max && j - len >= 0 && hist[j - len] == hist[n - 1 - len])
            len++;
        if (len > best_len) {
            best_len = len;
            best_j = j;
            if (len == ngram_max)
                break;
        }
    }
    if (best_len < ngram_min)
        return 0;
    int32_t k = 0;
    for (int32_t i = best_j + 1; i < n && k < max_out; i++)
        out[k++] = hist[i];
    return k;
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void sd_spec_opts_clamp(sd_spec_opts *o)
{
    o->tokens = clampi(o->tokens, 0, SD_SPEC_MAX_TOKENS);
    o->ngram_min = clampi(o->ngram_min, 1, SD_SPEC_MAX_NGRAM);
    o->ngram_max = clampi(o->ngram_max, o->ngram_min, SD_SPEC_MAX_NGRAM);
    o->max_seqs = clampi(o->max_seqs, 1, SD_SPEC_MAX_ROWS / (1 + o->tokens));
}
