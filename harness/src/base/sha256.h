/*
 * sha256.h — SHA-256 (FIPS 180-4), incremental, written from the standard's description. Used to
 * verify the content checksum of golden files (golden/README.md "Content checksum").
 */
#ifndef MC_SHA256_H
#define MC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define MC_SHA256_DIGEST_BYTES 32
#define MC_SHA256_HEX_LEN 64 /* lower-case hex digits, without the NUL */

struct mc_sha256 {
    uint32_t h[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t used; /* bytes in block */
};

void mc_sha256_init(struct mc_sha256 *s);
void mc_sha256_update(struct mc_sha256 *s, const void *data, size_t n);
/* Finishes and writes the 32-byte digest; s must be re-initialised before reuse. */
void mc_sha256_final(struct mc_sha256 *s, uint8_t out[MC_SHA256_DIGEST_BYTES]);

/* The digest as 64 lower-case hex digits plus a NUL. */
void mc_sha256_hex(const uint8_t digest[MC_SHA256_DIGEST_BYTES], char out[MC_SHA256_HEX_LEN + 1]);

/* Whether the x86 SHA extensions compute the blocks: on (the default where the CPU has them) or off
 * (the portable code, for tests comparing the two). Returns 1 when they are now in use. Call it before
 * hashing starts, not while another thread hashes. */
int mc_sha256_hardware(int on);

/* One-shot: the hex digest of data[0..n). */
void mc_sha256_hex_of(const void *data, size_t n, char out[MC_SHA256_HEX_LEN + 1]);

#endif
