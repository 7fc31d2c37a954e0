/* sha256.c — see sha256.h; FIPS 180-4 §4.1.2 (functions), §4.2.2 (constants), §5.3.3 (initial hash
 * value), §6.2 (computation). Byte order is big-endian as the standard specifies. */
#include "base/sha256.h"

#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define MC_SHA256_X86 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress_one(uint32_t h[8], const uint8_t b[64])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 | (uint32_t)b[4 * t + 2] << 8 |
               (uint32_t)b[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = bb;
        bb = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

static void compress_portable(uint32_t h[8], const uint8_t *b, size_t blocks)
{
    for (size_t i = 0; i < blocks; i++)
        compress_one(h, b + 64 * i);
}

#ifdef MC_SHA256_X86
/* The same computation on the x86 SHA extensions (SHA256RNDS2 does two rounds of §6.2.2 step 3,
 * SHA256MSG1 / SHA256MSG2 the σ0 and σ1 halves of the message schedule, step 1). The state lives in
 * two registers as the instructions want it: ABEF and CDGH (a in the high lane). */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_sha_ext(uint32_t h[8], const uint8_t *b,
                                                                         size_t blocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL); /* big-endian words */
    __m128i dcba = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (size_t i = 0; i < blocks; i++, b += 64) {
        __m128i w[16];
        for (int g = 0; g < 4; g++)
            w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(b + 16 * g)), bswap);
        for (int g = 4; g < 16; g++) /* W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16], four at a time */
            w[g] = _mm_sha256msg2_epu32(
                _mm_add_epi32(_mm_sha256msg1_epu32(w[g - 4], w[g - 3]), _mm_alignr_epi8(w[g - 1], w[g - 2], 4)),
                w[g - 1]);
        __m128i abef0 = abef, cdgh0 = cdgh;
        for (int g = 0; g < 16; g++) {
            __m128i wk = _mm_add_epi32(w[g], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));
}
#endif

static int use_hardware = -1; /* -1: not decided yet */

int mc_sha256_hardware(int on)
{
    int have = 0;
#ifdef MC_SHA256_X86
    /* CPUID leaf 1 ECX bit 19: SSE4.1 (SSSE3, bit 9, comes with it); leaf 7 EBX bit 29: the SHA extensions
     * (read directly: clang's __builtin_cpu_supports does not know "sha") */
    unsigned a, b, c, d;
    have = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9)) &&
           __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
#endif
    use_hardware = on && have;
    return use_hardware;
}

static void compress(uint32_t h[8], const uint8_t *b, size_t blocks)
{
    if (use_hardware < 0)
        mc_sha256_hardware(1);
#ifdef MC_SHA256_X86
    if (use_hardware) {
        compress_sha_ext(h, b, blocks);
        return;
    }
#endif
    compress_portable(h, b, blocks);
}

void mc_sha256_init(struct mc_sha256 *s)
{
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, H0, sizeof H0);
    s->total_bytes = 0;
    s->used = 0;
}

void mc_sha256_update(struct mc_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->total_bytes += n;
    if (s->used > 0) { /* complete the buffered block first */
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used < 64)
            return;
        compress(s->h, s->block, 1);
        s->used = 0;
    }
    if (n >= 64) { /* whole blocks straight from the input */
        size_t blocks = n / 64;
        compress(s->h, p, blocks);
        p += 64 * blocks;
        n -= 64 * blocks;
    }
    memcpy(s->block, p, n);
    s->used = n;
}

void mc_sha256_final(struct mc_sha256 *s, uint8_t out[MC_SHA256_DIGEST_BYTES])
{
    uint64_t bits = s->total_bytes * 8;
    s->block[s->used++] = 0x80;
    if (s->used > 56) {
        memset(s->block + s->used, 0, 64 - s->used);
        compress(s->h, s->block, 1);
        s->used = 0;
    }
    memset(s->block + s->used, 0, 56 - s->used);
    for (int i = 0; i < 8; i++)
        s->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress(s->h, s->block, 1);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void mc_sha256_hex(const uint8_t digest[MC_SHA256_DIGEST_BYTES], char out[MC_SHA256_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < MC_SHA256_DIGEST_BYTES; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[MC_SHA256_HEX_LEN] = '\0';
}

void mc_sha256_hex_of(const void *data, size_t n, char out[MC_SHA256_HEX_LEN + 1])
{
    struct mc_sha256 s;
    uint8_t d[MC_SHA256_DIGEST_BYTES];
    mc_sha256_init(&s);
    mc_sha256_update(&s, data, n);
    mc_sha256_final(&s, d);
    mc_sha256_hex(d, out);
}
