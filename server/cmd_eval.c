/* cmd_eval: the 'eval' subcommand — perplexity on a text file and KL/arg-max agreement against
 * a dense reference on the reference's own greedy continuations; results as one JSON line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/cmd.h"

#include "prune/eval.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed eval --model DIR [--ref DENSE_DIR] [--text FILE] [--prompts FILE] [options]\n"
               "  --text FILE        perplexity on this text (windows of --seq-len, default 512)\n"
               "  --max-tokens N     perplexity: at most N tokens of the text (default all)\n"
               "  --prompts FILE     with --ref: the reference generates --gen-tokens (default 128)\n"
               "                     greedy tokens per prompt; reports KL(ref || model) per token\n"
               "                     and the fraction of positions whose arg-maxes agree\n"
               "  --ref-ppl           also the reference's perplexity on --text\n"
               "  --threads N\n"
               "prints one JSON object: ppl, ref_ppl, ppl_tokens, kl, agree, kl_tokens\n");
}

static void on_progress(void *ud, const char *phase, int64_t done, int64_t total)
{
    if (*(int *)ud)
        fprintf(stderr, "\r\033[Keval: %s %lld/%lld", phase, (long long)done, (long long)total);
}

int sd_cmd_eval(int argc, char **argv)
{
    sd_eval_spec s;
    sd_eval_spec_default(&s);
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(k, "--ref-ppl")) {
            s.ref_ppl = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sparsed eval: %s needs a value\n", k);
            return 2;
        }
        const char *v = argv[++i];
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        int isnum = !errno && end != v && !*end && x >= 0;
        if (!strcmp(k, "--model"))
            s.model_dir = v;
        else if (!strcmp(k, "--ref"))
            s.ref_dir = v;
        else if (!strcmp(k, "--text"))
            s.text = v;
        else if (!strcmp(k, "--prompts"))
            s.prompts = v;
        else if (!strcmp(k, "--seq-len") && isnum)
            s.seq_len = (int32_t)x;
        else if (!strcmp(k, "--max-tokens") && isnum)
            s.max_tokens = x;
        else if (!strcmp(k, "--gen-tokens") && isnum)
            s.gen_tokens = (int32_t)x;
        else if (!strcmp(k, "--threads") && isnum)
            s.threads = (int)x;
        else {
            fprintf(stderr, "sparsed eval: bad option %s %s\n", k, v);
            usage(stderr);
            return 2;
        }
    }
    if (!s.model_dir || (!s.text && !s.prompts)) {
        usage(stderr);
        return 2;
    }
    if (s.prompts && !s.ref_dir) {
        fprintf(stderr, "sparsed eval: --prompts needs --ref (the dense model that generates)\n");
        return 2;
    }
    int tty = isatty(2);
    sd_eval_result r;
    sd_diag d = {0};
    int rc = sd_eval_run(&s, on_progress, &tty, NULL, &r, &d);
    if (tty)
        fputc('\n', stderr);
    if (rc != 0) {
        fprintf(stderr, "sparsed eval: %s\n", sd_diag_str(&d, rc));
        return 1;
    }
    printf("{\"model\": \"%s\", \"ppl\": %.6f, \"ref_ppl\": %.6f, \"ppl_tokens\": %lld, \"kl\": %.6f, "
           "\"agree\": %.6f, \"kl_tokens\": %lld}\n",
           s.model_dir, r.ppl, r.ref_ppl, (long long)r.ppl_tokens, r.kl, r.agree, (long long)r.kl_tokens);
    return 0;
}
