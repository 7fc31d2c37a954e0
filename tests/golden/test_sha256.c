/*
 * test_sha256.c — SHA-256 (harness/src/base/sha256.c) against the FIPS 180-4 example vectors (NIST CSRC
 * "Examples with Intermediate Values": one block, two blocks, the 896-bit message, a million 'a'),
 * the empty message, and every split of a message into two updates around the 55/56/64-byte
 * padding boundaries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"

static void assert_hex(const void *data, size_t n, const char *want)
{
    char got[MC_SHA256_HEX_LEN + 1];
    mc_sha256_hex_of(data, n, got);
    assert_string_equal(got, want);
}

static void test_vectors(void **state)
{
    (void)state;
    assert_hex("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_hex("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_hex(m448, strlen(m448), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                       "mnopqrstnopqrstu";
    assert_hex(m896, strlen(m896), "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state)
{
    (void)state;
    struct mc_sha256 s;
    uint8_t d[MC_SHA256_DIGEST_BYTES];
    char hex[MC_SHA256_HEX_LEN + 1], chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    mc_sha256_init(&s);
    for (int i = 0; i < 1000; i++)
        mc_sha256_update(&s, chunk, sizeof chunk);
    mc_sha256_final(&s, d);
    mc_sha256_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths around the padding boundaries, hashed in two pieces at every split point, equal the one-shot. */
static void test_splits(void **state)
{
    (void)state;
    uint8_t msg[200];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 131 + 7);
    const size_t lens[] = {1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        char want[MC_SHA256_HEX_LEN + 1], got[MC_SHA256_HEX_LEN + 1];
        mc_sha256_hex_of(msg, lens[k], want);
        for (size_t cut = 0; cut <= lens[k]; cut++) {
            struct mc_sha256 s;
            uint8_t d[MC_SHA256_DIGEST_BYTES];
            mc_sha256_init(&s);
            mc_sha256_update(&s, msg, cut);
            mc_sha256_update(&s, msg + cut, lens[k] - cut);
            mc_sha256_final(&s, d);
            mc_sha256_hex(d, got);
            assert_string_equal(got, want);
        }
    }
    /* 55 bytes of 'a' (one block with padding) and 56 (padding spills into a second block) */
    assert_hex("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 55,
               "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    assert_hex("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 56,
               "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_splits),
    };
    return cmocka_run_group_tests_name("sha256", tests, NULL, NULL);
}
