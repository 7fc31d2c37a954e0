/*
 * test_sha256.c — SHA-256 (harness/src/base/sha256.c) against the FIPS 180-4 example vectors (NIST CSRC
 * "Examples with Intermediate Values": one block, two blocks, the 896-bit message, a million 'a'),
 * the empty message, and every split of a message into two updates around the 55/56/64-byte
 * padding boundaries; each with the x86 SHA extensions where the CPU has them and with the portable
 * code, and the two on 3000 pseudo-random messages of every length from 0 to 2999 bytes fed in pieces.
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

/* The hardware and the portable code agree on random messages, fed in pieces of varying sizes. */
static void test_hardware_matches_portable(void **state)
{
    (void)state;
    if (!mc_sha256_hardware(1))
        skip(); /* no SHA extensions on this CPU: the portable code is what runs, tested above */
    static uint8_t msg[3000];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < sizeof msg; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        msg[i] = (uint8_t)x;
    }
    for (size_t len = 0; len < sizeof msg; len++) {
        char hex[2][MC_SHA256_HEX_LEN + 1];
        for (int hw = 0; hw < 2; hw++) {
            mc_sha256_hardware(hw);
            struct mc_sha256 s;
            uint8_t d[MC_SHA256_DIGEST_BYTES];
            mc_sha256_init(&s);
            for (size_t at = 0, piece = len % 97 + 1; at < len; at += piece, piece = piece * 7 % 211 + 1)
                mc_sha256_update(&s, msg + at, piece < len - at ? piece : len - at);
            mc_sha256_final(&s, d);
            mc_sha256_hex(d, hex[hw]);
        }
        if (strcmp(hex[0], hex[1]) != 0)
            fail_msg("length %zu: portable %s, hardware %s", len, hex[0], hex[1]);
    }
    mc_sha256_hardware(1);
}

static int portable(void **state)
{
    (void)state;
    mc_sha256_hardware(0);
    return 0;
}

static int hardware(void **state)
{
    (void)state;
    mc_sha256_hardware(1);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_splits),
    };
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_hardware_matches_portable),
    };
    int failed = cmocka_run_group_tests_name("sha256 (hardware where present)", tests, hardware, NULL);
    failed += cmocka_run_group_tests_name("sha256 (portable)", tests, portable, hardware);
    failed += cmocka_run_group_tests_name("sha256 hardware against portable", both, NULL, NULL);
    return failed;
}
