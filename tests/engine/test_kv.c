/* test_kv: the KV block allocator — allocation, exhaustion, reuse, sharing, double frees,
 * and sequence tables that grow all-or-nothing. */
#include "engine/kv.h"

#include "tests/harness.h"

static void test_alloc_until_full_then_reuse(void)
{
    sd_kv *kv = NULL;
    REQUIRE(sd_kv_init(&kv, 5, 16, NULL) == 0);
    CHECK(sd_kv_total(kv) == 5 && sd_kv_available(kv) == 5 && sd_kv_used(kv) == 0);
    int32_t ids[5], seen[5] = {0};
    for (int i = 0; i < 5; i++) {
        REQUIRE(sd_kv_alloc(kv, &ids[i]) == 0);
        REQUIRE(ids[i] >= 0 && ids[i] < 5);
        CHECK_MSG(!seen[ids[i]], "block %d handed out twice", ids[i]);
        seen[ids[i]] = 1;
        CHECK(sd_kv_refcount(kv, ids[i]) == 1);
    }
    int32_t x = -7;
    CHECK(sd_kv_alloc(kv, &x) == SD_EFULL);
    CHECK_MSG(x == -7, "output touched on failure");
    CHECK(sd_kv_available(kv) == 0 && sd_kv_used(kv) == 5);
    CHECK(sd_kv_release(kv, ids[2]) == 0);
    CHECK(sd_kv_refcount(kv, ids[2]) == 0);
    CHECK(sd_kv_available(kv) == 1);
    REQUIRE(sd_kv_alloc(kv, &x) == 0);
    CHECK_MSG(x == ids[2], "freed block %d not reused (got %d)", ids[2], x);
    sd_kv_free(kv);
    sd_kv_free(NULL);
}

static void test_double_free_and_bad_ids(void)
{
    sd_kv *kv = NULL;
    REQUIRE(sd_kv_init(&kv, 3, 4, NULL) == 0);
    int32_t b;
    REQUIRE(sd_kv_alloc(kv, &b) == 0);
    CHECK(sd_kv_release(kv, b) == 0);
    CHECK(sd_kv_release(kv, b) == SD_EINVAL);
    CHECK(sd_kv_available(kv) == 3); /* the double free did not push it twice */
    CHECK(sd_kv_release(kv, -1) == SD_EINVAL && sd_kv_release(kv, 3) == SD_EINVAL);
    CHECK(sd_kv_retain(kv, b) == SD_EINVAL); /* free blocks cannot be shared */
    CHECK(sd_kv_refcount(kv, 99) == -1);
    int32_t got[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(sd_kv_alloc(kv, &got[i]) == 0);
    CHECK(got[0] != got[1] && got[1] != got[2] && got[0] != got[2]);
    sd_kv_free(kv);
    sd_diag d = {0};
    CHECK(sd_kv_init(&kv, 0, 16, &d) == SD_EINVAL && d.msg[0]);
}

static void test_sharing_keeps_block_until_last_release(void)
{
    sd_kv *kv = NULL;
    REQUIRE(sd_kv_init(&kv, 2, 8, NULL) == 0);
    int32_t b;
    REQUIRE(sd_kv_alloc(kv, &b) == 0);
    CHECK(sd_kv_retain(kv, b) == 0);
    CHECK(sd_kv_refcount(kv, b) == 2);
    CHECK(sd_kv_release(kv, b) == 0);
    CHECK(sd_kv_available(kv) == 1);
    CHECK(sd_kv_release(kv, b) == 0);
    CHECK(sd_kv_available(kv) == 2);
    sd_kv_free(kv);
}

static void test_seq_append_and_release(void)
{
    sd_kv *kv = NULL;
    REQUIRE(sd_kv_init(&kv, 6, 4, NULL) == 0);
    sd_kv_seq a, b;
    sd_kv_seq_init(&a);
    sd_kv_seq_init(&b);
    CHECK(sd_kv_blocks_for(kv, 0) == 0 && sd_kv_blocks_for(kv, 4) == 1 && sd_kv_blocks_for(kv, 5) == 2);
    CHECK(sd_kv_seq_needed(kv, &a, 9) == 3);
    REQUIRE(sd_kv_seq_append(kv, &a, 9) == 0);
    CHECK(a.n_tokens == 9 && a.n_blocks == 3);
    CHECK(sd_kv_seq_needed(kv, &a, 3) == 0); /* 12 tokens still fit 3 blocks */
    REQUIRE(sd_kv_seq_append(kv, &a, 3) == 0);
    CHECK(a.n_blocks == 3 && sd_kv_available(kv) == 3);
    REQUIRE(sd_kv_seq_append(kv, &b, 8) == 0);
    CHECK(sd_kv_available(kv) == 1);
    /* 13 more tokens need 4 blocks, 1 is left: nothing changes */
    CHECK(sd_kv_seq_append(kv, &a, 13) == SD_EFULL);
    CHECK(a.n_tokens == 12 && a.n_blocks == 3 && sd_kv_available(kv) == 1);
    for (int i = 0; i < a.n_blocks; i++)
        for (int j = 0; j < b.n_blocks; j++)
            CHECK_MSG(a.blocks[i] != b.blocks[j], "block %d in two tables", a.blocks[i]);
    sd_kv_seq_release(kv, &a);
    CHECK(a.n_blocks == 0 && a.n_tokens == 0 && a.blocks == NULL);
    CHECK(sd_kv_available(kv) == 4);
    sd_kv_seq_release(kv, &a); /* releasing an empty sequence is a no-op */
    CHECK(sd_kv_available(kv) == 4);
    REQUIRE(sd_kv_seq_append(kv, &a, 13) == 0); /* fits now */
    sd_kv_seq_release(kv, &a);
    sd_kv_seq_release(kv, &b);
    sd_kv_seq_release(kv, NULL);
    CHECK(sd_kv_available(kv) == 6 && sd_kv_used(kv) == 0);
    sd_kv_free(kv);
}

int main(void)
{
    RUN(test_alloc_until_full_then_reuse);
    RUN(test_double_free_and_bad_ids);
    RUN(test_sharing_keeps_block_until_last_release);
    RUN(test_seq_append_and_release);
    return sd_test_done();
}
