/*
 * mamba2_forward.c — the forward and the core alone (cpu.h: mc_cpu_mamba2_core) of the cpu Mamba2
 * mixer: chunked SSD core, direct step for one-token rows, conv/SiLU/dt, gated RMSNorm and the
 * projections. mamba2.c describes the semantics, the variants, masks, threads and dimension letters.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "f32io.h"
#include "mamba2_internal.h"
#include "stream.h"
#include "vmath.h"

#define M2C_GRAM_MAX_BYTES ((size_t)256 << 20) /* shared C·Bᵀ buffer cap per forward */

/* ---- forward ----------------------------------------------------------------------------------- */

/* Everything a forward's parallel tasks read, and where they write. */
struct m2c_run {
    const struct mc_model *m;
    int64_t batch, len, Q; /* Q: the chunk length actually used, min(chunk, L) */
    const uint8_t *mask;   /* [B][L] or NULL */
    float *zx;             /* [B][L][proj]   in_proj output: z | xBC_raw | dt_raw */
    float *xbc;            /* [B][L][C]      after conv + SiLU: x | B | C */
    float *dt;             /* [B][L][H]      clamped softplus */
    float *hn;             /* [B][L][I]      core output y (then gated norm) */
    float *window;         /* [B][K][C] */
    float *state;          /* [B][H][P][N] */
    const int64_t *idx;    /* [B][L] real token positions of each row, in order */
    const int64_t *n_real; /* [B] */
    float *gram;           /* C·Bᵀ of every (row, group, chunk), q×q each, or NULL: computed per head */
    const int64_t *gram_off; /* [B] offset of row b's first Gram matrix in gram */
    float *scratch;        /* [workers][scratch_elems] */
    size_t scratch_elems;
    /* the packed call (batch 1, len T): window and state above are the pool's, indexed by slot */
    const struct mc_packed_args *pk;
    const int64_t *tok_seq; /* [T] the sequence of each packed token */
};

/* Rows of one panel of the intra-chunk product (m2c_chunk_core): 64, or the chunk when shorter. */
#define M2C_PANEL 64
static int64_t m2c_panel(int64_t Q)
{
    return Q < M2C_PANEL ? Q : M2C_PANEL;
}

/* Heads of one core task: the heads of a group (R of them, sharing B and C) cut into the fewest
 * blocks of at most M2C_HEAD_BLOCK, an even count when there are several (two workers, equal
 * shares): 24 → 4 × 6, 48 → 6 × 8. Depends on the shape only. */
#define M2C_HEAD_BLOCK 8
static int64_t m2c_head_block(int64_t R)
{
    int64_t blocks = (R + M2C_HEAD_BLOCK - 1) / M2C_HEAD_BLOCK;
    if (blocks > 1 && blocks % 2)
        blocks++;
    return (R + blocks - 1) / blocks;
}

/* Core tasks of a call: (row, group, head block). */
static int64_t m2c_core_tasks(const struct mc_model *m, int64_t batch)
{
    const int64_t hb = m2c_head_block(m->R);
    return batch * m->G * ((m->R + hb - 1) / hb);
}

static size_t m2c_scratch_elems(const struct mc_model *m, int64_t Q)
{
    /* Pm, Gp [SB][Q]; Xd [nh][Q][P]; Xs, Y [Q][nh·P]; Bg, Cg [Q][N]; ea, av, sfx [nh][Q]; seg, w, u [Q] */
    const int64_t nh = m2c_head_block(m->R);
    return (size_t)(2 * m2c_panel(Q) * Q + 3 * nh * Q * m->P + 2 * Q * m->N + 3 * nh * Q + 3 * Q);
}

/* Channel blocks of the conv tasks: MC_CPU_CONV_COLS channels each, so a batch of one row still runs
 * its conv on every thread (the blocking depends on C only). */
static int64_t m2c_conv_blocks(int64_t C)
{
    return (C + MC_CPU_CONV_COLS - 1) / MC_CPU_CONV_COLS;
}

/* Conv task: one (batch row, channel block), conv without activation into xbc (SiLU comes in
 * m2c_silu_dt_task). */
static void m2c_conv_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t L = r->len, nb = m2c_conv_blocks(m->C), b = task / nb, c0 = task % nb * MC_CPU_CONV_COLS;
    const int64_t c1 = c0 + MC_CPU_CONV_COLS < m->C ? c0 + MC_CPU_CONV_COLS : m->C;
    mc_cpu_conv_cols(L, m->C, c0, c1, m->K, r->zx + b * L * m->proj + m->inner, m->proj,
                     r->mask ? r->mask + b * L : NULL, r->window + (size_t)b * m2c_window_elems(m), m->conv_kc,
                     m->w[M2C_CONV_BIAS], 0, r->xbc + b * L * m->C, m->C);
}

#define M2C_ROW_BLOCK 64

/* Elementwise task over a block of M2C_ROW_BLOCK token rows: SiLU of the conv output, dt. */
static void m2c_silu_dt_task(void *ctx, int64_t blk, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t M = r->batch * r->len, r0 = blk * M2C_ROW_BLOCK;
    const int64_t r1 = r0 + M2C_ROW_BLOCK < M ? r0 + M2C_ROW_BLOCK : M;
    const float *dt_bias = m->w[M2C_DT_BIAS];
    for (int64_t t = r0; t < r1; t++) {
        mc_cpu_vsilu(r->xbc + t * m->C, m->C);
        const float *raw = r->zx + t * m->proj + m->inner + m->C; /* [H] */
        float *dt = r->dt + t * m->H;
        for (int64_t h = 0; h < m->H; h++) {
            float v = mc_cpu_softplus(raw[h] + dt_bias[h]);
            if (v < m->lo)
                v = m->lo;
            if (v > m->hi)
                v = m->hi;
            dt[h] = v;
        }
    }
}

/* The direct recurrent step of one (row, head) for the real token at position t. */
static void m2c_step(const struct m2c_run *r, int64_t b, int64_t h, int64_t t, float *s)
{
    const struct mc_model *m = r->m;
    const int64_t P = m->P, N = m->N, g = h / m->R;
    const int64_t row = b * r->len + t;
    const float *xr = r->xbc + row * m->C;
    const float *restrict xh = xr + h * P;
    const float *restrict bg = xr + m->inner + g * N;
    const float *restrict cg = xr + m->inner + m->GN + g * N;
    const float dt = r->dt[row * m->H + h];
    float decay = dt * m->a_neg[h];
    mc_cpu_vexp(&decay, 1); /* the chunked core's exp, so that decode and prefill share it */
    const float dskip = m->w[M2C_D][h];
    float *yo = r->hn + row * m->inner + h * P;
    for (int64_t p = 0; p < P; p++) {
        const float dx = dt * xh[p];
        float *restrict sp = s + p * N;
        float acc = 0.0f;
        for (int64_t n = 0; n < N; n++) {
            sp[n] = decay * sp[n] + dx * bg[n];
            acc += sp[n] * cg[n];
        }
        yo[p] = acc + dskip * xh[p];
    }
}


/* Chunked SSD of one (row b, block of heads [h0, h1) of one group) over the row's real tokens
 * idx[0..n) (variants block above).
 *
 * Per chunk of q tokens and head h, with a_l = A_h·dt_l (<= 0) and Xd = dt·x:
 *   Y   = diag(exp(Σ_{k<=l} a_k)) · C·S_hᵀ                     the entering state, decayed to each token
 *   Y  += (C·Bᵀ ⊙ E)·Xd,  E[l][s] = exp(Σ_{k=s+1..l} a_k), s <= l    intra-chunk
 *   S_h = exp(Σ a)·S_h + (exp(Σ_{k=l+1..q-1} a_k) ⊙ Xd)ᵀ·B       the state at the chunk end
 * The heads of a block share B and C (one group), so the two state products run once for the block
 * with the heads' states stacked, [(h1-h0)·P][N]: C·S_blkᵀ and S_blk += Xsᵀ·B are single GEMMs, not
 * one small GEMM per head. The intra-chunk product runs per head in row panels of M2C_PANEL tokens:
 * panel i multiplies only the blocks left of and on the diagonal (the upper ones are zero), so at
 * q = 256 it does 10/16 of the full product, and the mask of a block left of the diagonal is the
 * rank-one E[l][s] = u_l·w_s with u_l = exp(Σ_{k=r0..l} a_k), w_s = exp(Σ_{k=s+1..r0-1} a_k) (r0: the
 * panel's first token), so only the diagonal blocks exponentiate a triangle. Every exponent is a sum
 * over its own segment of same-sign terms, never a difference of two cumsums. Mathematically this is
 * the chunk-q product; the blocking changes only the order of float operations (chunk_size_invariance
 * bounds that). */
static void m2c_chunk_core(const struct m2c_run *r, int64_t b, int64_t h0, int64_t h1, float *scratch)
{
    const struct mc_model *m = r->m;
    const int64_t P = m->P, N = m->N, Q = r->Q, g = h0 / m->R, SB = m2c_panel(Q), nh = h1 - h0, W = nh * P;
    const int64_t L = r->len, n = r->n_real[b], C = m->C;
    const int64_t *idx = r->idx + b * L;
    float *S = r->state + (size_t)b * m2c_state_elems(m) + (size_t)(h0 * P * N); /* [nh·P][N] */
    /* a row without padding reads B and C in place (token l is row l); otherwise they are gathered */
    const int in_place = n == L;

    float *Pm = scratch;      /* [SB][Q] the masked C·Bᵀ of one panel and head */
    float *Gp = Pm + SB * Q;  /* [SB][Q] C·Bᵀ of one panel, when not shared */
    float *Xd = Gp + SB * Q;  /* [nh][Q][P] dt·x per head */
    float *Xs = Xd + nh * Q * P; /* [Q][nh·P] Xd scaled by the decay to the chunk end */
    float *Y = Xs + Q * W;    /* [Q][nh·P] */
    float *Bg = Y + Q * W;    /* [Q][N] gathered B */
    float *Cg = Bg + Q * N;   /* [Q][N] gathered C */
    float *ea = Cg + Q * N;   /* [nh][Q] exp(Σ_{k<=l} a_k) */
    float *av = ea + nh * Q;  /* [nh][Q] a_l */
    float *sfx = av + nh * Q; /* [nh][Q] exp(Σ_{k=l+1..q-1} a_k) */
    float *seg = sfx + nh * Q; /* [Q] segment sums of one row of a diagonal block */
    float *w = seg + Q;       /* [Q] w_s of the current panel */
    float *u = w + Q;         /* [Q] u_l of the current panel */

    for (int64_t c0 = 0; c0 < n; c0 += Q) {
        const int64_t q = n - c0 < Q ? n - c0 : Q;
        const float *Bc = Bg, *Cc = Cg;
        int64_t ld = N;
        if (in_place) {
            Bc = r->xbc + (b * L + c0) * C + m->inner + g * N;
            Cc = Bc + m->GN;
            ld = C;
        }
        /* gather the chunk's rows */
        for (int64_t l = 0; l < q; l++) {
            const int64_t row = b * L + idx[c0 + l];
            const float *xr = r->xbc + row * C;
            for (int64_t j = 0; j < nh; j++) {
                const int64_t h = h0 + j;
                const float dt = r->dt[row * m->H + h];
                const float *restrict xh = xr + h * P;
                float *restrict xd = Xd + (j * Q + l) * P;
                for (int64_t p = 0; p < P; p++)
                    xd[p] = xh[p] * dt;
                av[j * Q + l] = m->a_neg[h] * dt;
            }
            if (!in_place) {
                memcpy(Bg + l * N, xr + m->inner + g * N, (size_t)N * sizeof(float));
                memcpy(Cg + l * N, xr + m->inner + m->GN + g * N, (size_t)N * sizeof(float));
            }
        }
        /* exps of the prefix and suffix sums of a per head (same-sign terms, vmath.h) */
        for (int64_t j = 0; j < nh; j++) {
            mc_cpu_vexp_prefix(av + j * Q, ea + j * Q, q);
            mc_cpu_vexp_suffix(av + j * Q, sfx + j * Q, q);
        }
        /* state -> output for the block: Y = Cc·S_blkᵀ, head j's columns scaled by exp(Σ_{k<=l} a_k) */
        mc_cpu_sgemm(0, 1, q, W, N, 1.0f, Cc, ld, S, N, 0.0f, Y, W);
        for (int64_t l = 0; l < q; l++)
            for (int64_t j = 0; j < nh; j++) {
                const float f = ea[j * Q + l];
                float *restrict yl = Y + l * W + j * P;
                for (int64_t p = 0; p < P; p++)
                    yl[p] *= f;
            }
        /* intra-chunk, panel by panel, head by head: Y[r0..r1)[head j] += Pm_j · Xd_j[0..r1) */
        const float *gram = r->gram ? r->gram + r->gram_off[b] + (g * ((n + Q - 1) / Q) + c0 / Q) * Q * Q : NULL;
        for (int64_t r0 = 0; r0 < q; r0 += SB) {
            const int64_t r1 = r0 + SB < q ? r0 + SB : q, nr = r1 - r0;
            const float *G = Gp;
            int64_t ldg = r1;
            if (gram) {
                G = gram + r0 * q;
                ldg = q;
            } else {
                mc_cpu_sgemm(0, 1, nr, r1, N, 1.0f, Cc + r0 * ld, ld, Bc, ld, 0.0f, Gp, r1);
            }
            for (int64_t j = 0; j < nh; j++) {
                const float *a = av + j * Q;
                if (r0 > 0) { /* w_s = exp(Σ_{k=s+1..r0-1} a_k), u_l = exp(Σ_{k=r0..r0+l} a_k) */
                    mc_cpu_vexp_suffix(a, w, r0);
                    mc_cpu_vexp_prefix(a + r0, u, nr);
                }
                for (int64_t l = 0; l < nr; l++) {
                    float *restrict pl = Pm + l * r1;
                    const float *restrict gl = G + l * ldg;
                    const float ul = u[l];
                    for (int64_t s2 = 0; s2 < r0; s2++) /* left of the diagonal block: rank-one mask */
                        pl[s2] = gl[s2] * (ul * w[s2]);
                    /* the diagonal block: the stable segsum row, seg[s] of row l = seg[s] of row l-1 + a_l */
                    mc_cpu_vexp_segsum_row(seg, l, a[r0 + l], pl + r0);
                    for (int64_t s2 = r0; s2 <= r0 + l; s2++)
                        pl[s2] *= gl[s2];
                    for (int64_t s2 = r0 + l + 1; s2 < r1; s2++)
                        pl[s2] = 0.0f;
                }
                mc_cpu_sgemm(0, 0, nr, P, r1, 1.0f, Pm, r1, Xd + j * Q * P, P, 1.0f, Y + r0 * W + j * P, W);
            }
        }
        /* chunk state and inter-chunk step for the block: S_h *= exp(Σ a) per head, then
         * S_blk += Xsᵀ·Bc with Xs = decay_to_end ⊙ Xd (rows of Xd scaled rather than rows of B) */
        for (int64_t j = 0; j < nh; j++) {
            const float e = ea[j * Q + q - 1];
            float *restrict sh = S + j * P * N;
            for (int64_t k = 0; k < P * N; k++)
                sh[k] *= e;
            const float *sf = sfx + j * Q;
            for (int64_t l = 0; l < q; l++) {
                const float f = sf[l];
                const float *restrict xl = Xd + (j * Q + l) * P;
                float *restrict xsl = Xs + l * W + j * P;
                for (int64_t p = 0; p < P; p++)
                    xsl[p] = xl[p] * f;
            }
        }
        mc_cpu_sgemm(1, 0, W, N, q, 1.0f, Xs, W, Bc, ld, 1.0f, S, N);
        /* D skip and scatter to the token rows */
        for (int64_t l = 0; l < q; l++) {
            const int64_t row = b * L + idx[c0 + l];
            const float *restrict xh = r->xbc + row * C + h0 * P;
            const float *restrict yl = Y + l * W;
            float *restrict yo = r->hn + row * m->inner + h0 * P;
            for (int64_t j = 0; j < nh; j++) {
                const float dskip = m->w[M2C_D][h0 + j];
                for (int64_t p = j * P; p < (j + 1) * P; p++)
                    yo[p] = yl[p] + dskip * xh[p];
            }
        }
    }
}

/* Chunks of row b that run the chunked core (and so have Gram matrices): none for a row of at most
 * one real token, which takes the direct step. The forward's gram_off layout counts the same way. */
static int64_t m2c_row_chunks(const struct m2c_run *r, int64_t b)
{
    return r->n_real[b] > 1 ? (r->n_real[b] + r->Q - 1) / r->Q : 0;
}

/* Gram task: C·Bᵀ of one (row, group, chunk), over the row's real tokens; task numbers run over
 * rows, then groups, then chunks. Only the panels m2c_chunk_core reads are computed: the blocks left
 * of and on the diagonal (the rest of the q×q matrix is never read). */
static void m2c_gram_task(void *ctx, int64_t task, int worker)
{
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t N = m->N, Q = r->Q, L = r->len, SB = m2c_panel(Q);
    int64_t b = 0, rest = task;
    for (;; b++) {
        const int64_t per_row = m->G * m2c_row_chunks(r, b);
        if (rest < per_row)
            break;
        rest -= per_row;
    }
    const int64_t n = r->n_real[b], nch = m2c_row_chunks(r, b), g = rest / nch, c = rest % nch;
    const int64_t c0 = c * Q, q = n - c0 < Q ? n - c0 : Q;
    const float *Bc, *Cc;
    int64_t ld = N;
    if (n == L) { /* no padding: read in place, as m2c_chunk_core does */
        Bc = r->xbc + (b * L + c0) * m->C + m->inner + g * N;
        Cc = Bc + m->GN;
        ld = m->C;
    } else {
        float *Bg = r->scratch + (size_t)worker * r->scratch_elems, *Cg = Bg + Q * N;
        for (int64_t l = 0; l < q; l++) {
            const float *xr = r->xbc + (b * L + r->idx[b * L + c0 + l]) * m->C;
            memcpy(Bg + l * N, xr + m->inner + g * N, (size_t)N * sizeof(float));
            memcpy(Cg + l * N, xr + m->inner + m->GN + g * N, (size_t)N * sizeof(float));
        }
        Bc = Bg;
        Cc = Cg;
    }
    float *gram = r->gram + r->gram_off[b] + (g * nch + c) * Q * Q;
    for (int64_t r0 = 0; r0 < q; r0 += SB) {
        const int64_t r1 = r0 + SB < q ? r0 + SB : q;
        mc_cpu_sgemm(0, 1, r1 - r0, r1, N, 1.0f, Cc + r0 * ld, ld, Bc, ld, 0.0f, gram + r0 * q, q);
    }
}

static void m2c_core_task(void *ctx, int64_t task, int worker)
{
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t HB = m2c_head_block(m->R), per_group = (m->R + HB - 1) / HB, per_row = m->G * per_group;
    const int64_t b = task / per_row, g = task % per_row / per_group, h0 = g * m->R + task % per_group * HB;
    const int64_t h1 = h0 + HB < (g + 1) * m->R ? h0 + HB : (g + 1) * m->R;
    if (r->n_real[b] == 1) {
        for (int64_t h = h0; h < h1; h++)
            m2c_step(r, b, h, r->idx[b * r->len],
                     r->state + (size_t)b * m2c_state_elems(m) + (size_t)(h * m->P * m->N));
    } else if (r->n_real[b] > 1) {
        m2c_chunk_core(r, b, h0, h1, r->scratch + (size_t)worker * r->scratch_elems);
    }
}

/* ---- the packed call: one chunk grid over the packed token axis --------------------------------
 *
 * The n sequences of a packed call lie back to back on one token axis of T tokens, and the chunked
 * SSD runs over it on ONE grid of chunks of Q tokens (tokens 0, Q, 2Q, ... of the packed axis), as the
 * varlen kernels of serving engines do: a chunk may hold the tail of one sequence, several whole short
 * ones and the head of the next. Inside a chunk every quantity that crosses tokens restarts where a
 * sequence begins (a segment: the tokens of one sequence inside one chunk):
 *   - the prefix sums exp(Σ_{k=start..l} a_k) that decay the entering state to token l start at the
 *     segment's first token, not at the chunk's (S2.2);
 *   - the suffix sums exp(Σ_{k=l+1..end-1} a_k) that decay token l's input to the state run to the
 *     segment's last token, not the chunk's;
 *   - the intra-chunk mask E[l][s] is zero when s and l belong to different sequences (S2.3);
 *   - the entering state of a segment is its own sequence's: the state carried in its slot from the
 *     sequence's previous chunk, or, when the sequence begins in this chunk, its slot's initial state
 *     (zeroed beforehand when has_initial_state = 0), so no state flows from sequence i-1 into i, and a
 *     sequence that starts mid-chunk decays its initial state from its own first token (S2.1, S2.2);
 *   - each segment's state update S = exp(Σ_seg a)·S + (sfx ⊙ Xd)ᵀ·B writes its own slot only.
 * The state lives in the pool row of its sequence throughout (slot-indexed reads and writes), so the
 * state at a chunk boundary that a sequence crosses is simply its slot's content at that point. */

/* The packed SSD of one block of heads [h0, h1) of one group over the whole packed axis. */
static void m2c_packed_chunk_core(const struct m2c_run *r, int64_t h0, int64_t h1, float *scratch)
{
    const struct mc_model *m = r->m;
    const struct mc_packed_args *pk = r->pk;
    const int64_t P = m->P, N = m->N, Q = r->Q, g = h0 / m->R, SB = m2c_panel(Q), nh = h1 - h0, W = nh * P;
    const int64_t T = r->len, C = m->C, nch = (T + Q - 1) / Q;
    const size_t se = m2c_state_elems(m);
    const int64_t *seq = r->tok_seq;

    float *Pm = scratch;
    float *Gp = Pm + SB * Q;
    float *Xd = Gp + SB * Q;
    float *Xs = Xd + nh * Q * P;
    float *Y = Xs + Q * W;
    float *ea = Y + Q * W + 2 * Q * N; /* the same layout as m2c_chunk_core (Bg, Cg unused: in place) */
    float *av = ea + nh * Q;
    float *sfx = av + nh * Q;
    float *seg = sfx + nh * Q;
    float *w = seg + Q;
    float *u = w + Q;

    for (int64_t c0 = 0; c0 < T; c0 += Q) {
        const int64_t q = T - c0 < Q ? T - c0 : Q;
        const float *Bc = r->xbc + c0 * C + m->inner + g * N, *Cc = Bc + m->GN;
        const int64_t ld = C;
        for (int64_t l = 0; l < q; l++) {
            const int64_t row = c0 + l;
            const float *xr = r->xbc + row * C;
            for (int64_t j = 0; j < nh; j++) {
                const int64_t h = h0 + j;
                const float dt = r->dt[row * m->H + h];
                const float *restrict xh = xr + h * P;
                float *restrict xd = Xd + (j * Q + l) * P;
                for (int64_t p = 0; p < P; p++)
                    xd[p] = xh[p] * dt;
                av[j * Q + l] = m->a_neg[h] * dt;
            }
        }
        /* prefix sums restarting at each segment's first token, suffix sums at its last */
        for (int64_t j = 0; j < nh; j++) {
            const float *a = av + j * Q;
            float *e = ea + j * Q, *sf = sfx + j * Q;
            float run = 0.0f;
            for (int64_t l = 0; l < q; l++) {
                if (l > 0 && seq[c0 + l] != seq[c0 + l - 1])
                    run = 0.0f;
                run += a[l];
                e[l] = run;
            }
            run = 0.0f;
            for (int64_t l = q - 1; l >= 0; l--) {
                if (l < q - 1 && seq[c0 + l] != seq[c0 + l + 1])
                    run = 0.0f;
                sf[l] = run;
                run += a[l];
            }
            mc_cpu_vexp(e, q);
            mc_cpu_vexp(sf, q);
        }
        /* state -> output, segment by segment from each segment's own (slot) state */
        for (int64_t s0 = 0, s1; s0 < q; s0 = s1) {
            const int64_t i = seq[c0 + s0];
            s1 = pk->cu_seqlens[i + 1] - c0 < q ? pk->cu_seqlens[i + 1] - c0 : q;
            const float *S = r->state + (size_t)pk->slots[i] * se + (size_t)(h0 * P * N);
            mc_cpu_sgemm(0, 1, s1 - s0, W, N, 1.0f, Cc + s0 * ld, ld, S, N, 0.0f, Y + s0 * W, W);
        }
        for (int64_t l = 0; l < q; l++)
            for (int64_t j = 0; j < nh; j++) {
                const float f = ea[j * Q + l];
                float *restrict yl = Y + l * W + j * P;
                for (int64_t p = 0; p < P; p++)
                    yl[p] *= f;
            }
        /* intra-chunk, as m2c_chunk_core, with the mask cut at each row's segment start */
        const float *gram = r->gram ? r->gram + (g * nch + c0 / Q) * Q * Q : NULL;
        for (int64_t r0 = 0; r0 < q; r0 += SB) {
            const int64_t r1 = r0 + SB < q ? r0 + SB : q, nr = r1 - r0;
            const float *G = Gp;
            int64_t ldg = r1;
            if (gram) {
                G = gram + r0 * q;
                ldg = q;
            } else {
                mc_cpu_sgemm(0, 1, nr, r1, N, 1.0f, Cc + r0 * ld, ld, Bc, ld, 0.0f, Gp, r1);
            }
            for (int64_t j = 0; j < nh; j++) {
                const float *a = av + j * Q;
                if (r0 > 0) {
                    float acc = 0.0f;
                    w[r0 - 1] = 0.0f;
                    for (int64_t s2 = r0 - 2; s2 >= 0; s2--) {
                        acc += a[s2 + 1];
                        w[s2] = acc;
                    }
                    acc = 0.0f;
                    for (int64_t l = 0; l < nr; l++) {
                        acc += a[r0 + l];
                        u[l] = acc;
                    }
                    mc_cpu_vexp(w, r0);
                    mc_cpu_vexp(u, nr);
                }
                for (int64_t l = 0; l < nr; l++) {
                    float *restrict pl = Pm + l * r1;
                    const float *restrict gl = G + l * ldg;
                    const float ul = u[l];
                    for (int64_t s2 = 0; s2 < r0; s2++)
                        pl[s2] = gl[s2] * (ul * w[s2]);
                    const float al = a[r0 + l];
                    for (int64_t s2 = 0; s2 < l; s2++)
                        seg[s2] += al;
                    seg[l] = 0.0f;
                    mc_cpu_vexp_to(seg, pl + r0, l + 1);
                    for (int64_t s2 = r0; s2 <= r0 + l; s2++)
                        pl[s2] *= gl[s2];
                    for (int64_t s2 = r0 + l + 1; s2 < r1; s2++)
                        pl[s2] = 0.0f;
                    /* no token of another sequence reaches row l: zero left of its segment start */
                    const int64_t lo = pk->cu_seqlens[seq[c0 + r0 + l]] - c0;
                    for (int64_t s2 = 0; s2 < lo; s2++)
                        pl[s2] = 0.0f;
                }
                mc_cpu_sgemm(0, 0, nr, P, r1, 1.0f, Pm, r1, Xd + j * Q * P, P, 1.0f, Y + r0 * W + j * P, W);
            }
        }
        /* each segment's state update into its own slot: S *= exp(Σ_seg a), S += (sfx ⊙ Xd)ᵀ·B */
        for (int64_t j = 0; j < nh; j++) {
            const float *sf = sfx + j * Q;
            for (int64_t l = 0; l < q; l++) {
                const float f = sf[l];
                const float *restrict xl = Xd + (j * Q + l) * P;
                float *restrict xsl = Xs + l * W + j * P;
                for (int64_t p = 0; p < P; p++)
                    xsl[p] = xl[p] * f;
            }
        }
        for (int64_t s0 = 0, s1; s0 < q; s0 = s1) {
            const int64_t i = seq[c0 + s0];
            s1 = pk->cu_seqlens[i + 1] - c0 < q ? pk->cu_seqlens[i + 1] - c0 : q;
            float *S = r->state + (size_t)pk->slots[i] * se + (size_t)(h0 * P * N);
            for (int64_t j = 0; j < nh; j++) {
                const float e = ea[j * Q + s1 - 1];
                float *restrict sh = S + j * P * N;
                for (int64_t k = 0; k < P * N; k++)
                    sh[k] *= e;
            }
            mc_cpu_sgemm(1, 0, W, N, s1 - s0, 1.0f, Xs + s0 * W, W, Bc + s0 * ld, ld, 1.0f, S, N);
        }
        for (int64_t l = 0; l < q; l++) {
            const int64_t row = c0 + l;
            const float *restrict xh = r->xbc + row * C + h0 * P;
            const float *restrict yl = Y + l * W;
            float *restrict yo = r->hn + row * m->inner + h0 * P;
            for (int64_t j = 0; j < nh; j++) {
                const float dskip = m->w[M2C_D][h0 + j];
                for (int64_t p = j * P; p < (j + 1) * P; p++)
                    yo[p] = yl[p] + dskip * xh[p];
            }
        }
    }
}

/* Packed core task: one (group, head block) over the whole packed axis. */
static void m2c_packed_core_task(void *ctx, int64_t task, int worker)
{
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t HB = m2c_head_block(m->R), per_group = (m->R + HB - 1) / HB;
    const int64_t g = task / per_group, h0 = g * m->R + task % per_group * HB;
    const int64_t h1 = h0 + HB < (g + 1) * m->R ? h0 + HB : (g + 1) * m->R;
    m2c_packed_chunk_core(r, h0, h1, r->scratch + (size_t)worker * r->scratch_elems);
}

/* Packed conv task: one (sequence, channel block), the sequence's tokens convolved from its slot's
 * window (zeros when it starts fresh: mc_cpu_packed_reset), which then holds its last K inputs. No
 * token of another sequence is read. */
static void m2c_packed_conv_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t nb = m2c_conv_blocks(m->C), i = task / nb, c0 = task % nb * MC_CPU_CONV_COLS;
    const int64_t c1 = c0 + MC_CPU_CONV_COLS < m->C ? c0 + MC_CPU_CONV_COLS : m->C;
    const int64_t t0 = r->pk->cu_seqlens[i], n = r->pk->cu_seqlens[i + 1] - t0;
    if (n == 0)
        return;
    mc_cpu_conv_cols(n, m->C, c0, c1, m->K, r->zx + t0 * m->proj + m->inner, m->proj, NULL,
                     r->window + (size_t)r->pk->slots[i] * m2c_window_elems(m), m->conv_kc, m->w[M2C_CONV_BIAS], 0,
                     r->xbc + t0 * m->C, m->C);
}

/* Gated RMSNorm over a block of token rows (gate before norm, groups of gs; norm_before_gate: the gate after
 * the norm; no_gated_norm: the gate alone); padding rows are left alone (their output is set from
 * out_proj.bias afterwards). */
static void m2c_norm_task(void *ctx, int64_t blk, int worker)
{
    (void)worker;
    const struct m2c_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t M = r->batch * r->len, r0 = blk * M2C_ROW_BLOCK;
    const int64_t r1 = r0 + M2C_ROW_BLOCK < M ? r0 + M2C_ROW_BLOCK : M;
    const int64_t inner = m->inner, gs = m->gs;
    const float *w_norm = m->w[M2C_NORM];
    for (int64_t t = r0; t < r1; t++) {
        float *row = r->hn + t * inner;
        const float *z = r->zx + t * m->proj;
        if (r->mask && !r->mask[t]) {
            memset(row, 0, (size_t)inner * sizeof *row);
            continue;
        }
        if (!m->cfg.norm_before_gate)
            mc_cpu_vmul_silu(row, z, inner); /* gate: row · silu(z) */
        if (m->cfg.no_gated_norm)
            continue;
        for (int64_t j0 = 0; j0 < inner; j0 += gs) {
            float ss = 0.0f;
            for (int64_t i = j0; i < j0 + gs; i++)
                ss += row[i] * row[i];
            const float rstd = 1.0f / sqrtf(ss / (float)gs + m->eps);
            for (int64_t i = j0; i < j0 + gs; i++)
                row[i] = row[i] * rstd * w_norm[i];
        }
        if (m->cfg.norm_before_gate)
            mc_cpu_vmul_silu(row, z, inner); /* the gate after the norm */
    }
}

enum mc_backend_status mc_mamba2_cpu_forward(struct mc_model *model, struct mc_cache *cache,
                                             const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_rows rows = {0};
    struct mc_cpu_f32io io = {0};
    float *zx = NULL, *xbc = NULL, *dt = NULL, *hn = NULL, *scratch = NULL;
    int64_t *idx = NULL, *n_real = NULL, *gram_off = NULL;
    float *gram = NULL;

    if ((st = mc_cpu_forward_check(model, cache, args, M2C_WHO, msg)) != MC_BACKEND_OK)
        goto cleanup;

    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L;
    const int64_t Q = m->chunk < L ? m->chunk : L;
    const int64_t core_tasks = m2c_core_tasks(m, Bsz);
    const int workers = (int)(m->threads < core_tasks ? m->threads : core_tasks);
    const size_t scratch_elems = m2c_scratch_elems(m, Q);

    /* every allocation before the cache is touched, so a failure leaves it unchanged */
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, M * m->D);
    zx = malloc((size_t)(M * m->proj) * sizeof *zx);
    xbc = malloc((size_t)(M * m->C) * sizeof *xbc);
    dt = malloc((size_t)(M * m->H) * sizeof *dt);
    hn = malloc((size_t)(M * m->inner) * sizeof *hn);
    idx = malloc((size_t)M * sizeof *idx);
    gram_off = malloc((size_t)Bsz * sizeof *gram_off);
    n_real = malloc((size_t)Bsz * sizeof *n_real);
    scratch = malloc((size_t)workers * scratch_elems * sizeof *scratch);
    const int rows_nomem = mc_cpu_rows_alloc(&rows, &m->cache_shape, cache, Bsz);
    if (io_nomem || !zx || !xbc || !dt || !hn || !idx || !n_real || !gram_off || !scratch || rows_nomem) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    mc_cpu_rows_start(&rows, &m->cache_shape, cache, Bsz);

    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    for (int64_t b = 0; b < Bsz; b++) {
        int64_t cnt = 0;
        for (int64_t t = 0; t < L; t++)
            if (!args->mask || args->mask[b * L + t])
                idx[b * L + cnt++] = t;
        n_real[b] = cnt;
    }
    /* One Gram matrix C·Bᵀ per (row, group, chunk) when the heads of a group share it (H > G) and it
     * fits M2C_GRAM_MAX_BYTES; otherwise each head computes its own (the same sgemm on the same data:
     * the same bits). Allocated after the cache may have been reset, so its failure falls back too. */
    int64_t n_gram = 0, gram_elems = 0;
    for (int64_t b = 0; b < Bsz; b++) {
        const int64_t nch = n_real[b] > 1 ? (n_real[b] + Q - 1) / Q : 0; /* one token: direct step */
        gram_off[b] = gram_elems;
        n_gram += m->G * nch;
        gram_elems += m->G * nch * Q * Q;
    }
    if (m->R > 1 && n_gram > 0 && (size_t)gram_elems <= M2C_GRAM_MAX_BYTES / sizeof(float))
        gram = malloc((size_t)gram_elems * sizeof *gram);

    struct m2c_run run = {
        .m = m,
        .batch = Bsz,
        .len = L,
        .Q = Q,
        .mask = args->mask,
        .zx = zx,
        .xbc = xbc,
        .dt = dt,
        .hn = hn,
        .window = rows.window,
        .state = rows.state,
        .idx = idx,
        .n_real = n_real,
        .gram = gram,
        .gram_off = gram_off,
        .scratch = scratch,
        .scratch_elems = scratch_elems,
    };
    const int64_t row_blocks = (M + M2C_ROW_BLOCK - 1) / M2C_ROW_BLOCK;

    mc_cpu_linear_tiled(M, m->proj, m->D, x, m->D, m->w[M2C_IN_PROJ], m->w[M2C_IN_PROJ_BIAS], zx, m->proj,
                        m->threads);
    mc_cpu_parallel_for(Bsz * m2c_conv_blocks(m->C), m2c_conv_task, &run, m->threads);
    mc_cpu_parallel_for(row_blocks, m2c_silu_dt_task, &run, m->threads);
    if (gram)
        mc_cpu_parallel_for(n_gram, m2c_gram_task, &run, workers);
    /* stage probes (probe.h): NULL unless recording */
    struct mc_cpu_probes *pr = m->probes;
    const uint8_t *pm = args->mask;
    mc_cpu_probe_rows(mc_cpu_probe_add(pr, "conv_out", 3, (const int64_t[]){Bsz, L, m->C}), m->C, xbc, m->C, M, pm);
    mc_cpu_probe_rows(mc_cpu_probe_add(pr, "dt", 3, (const int64_t[]){Bsz, L, m->H}), m->H, dt, m->H, M, pm);
    mc_cpu_probe_rows(mc_cpu_probe_add(pr, "B", 4, (const int64_t[]){Bsz, L, m->G, m->N}), m->GN, xbc + m->inner,
                      m->C, M, pm);
    mc_cpu_probe_rows(mc_cpu_probe_add(pr, "C", 4, (const int64_t[]){Bsz, L, m->G, m->N}), m->GN,
                      xbc + m->inner + m->GN, m->C, M, pm);
    mc_cpu_parallel_for(core_tasks, m2c_core_task, &run, workers);
    float *p_scan = mc_cpu_probe_add(pr, "scan_out", 3, (const int64_t[]){Bsz, L, m->inner});
    float *p_norm = mc_cpu_probe_add(pr, "norm_in", 3, (const int64_t[]){Bsz, L, m->inner});
    mc_cpu_probe_rows(p_scan, m->inner, hn, m->inner, M, pm);
    mc_cpu_probe_rows(p_norm, m->inner, hn, m->inner, M, pm);
    for (int64_t t = 0; p_norm && t < M; t++) /* the gate the norm task applies first */
        if (!pm || pm[t])
            mc_cpu_vmul_silu(p_norm + t * m->inner, zx + t * m->proj, m->inner);
    mc_cpu_parallel_for(row_blocks, m2c_norm_task, &run, m->threads);
    mc_cpu_linear_tiled(M, m->D, m->inner, hn, m->inner, m->w[M2C_OUT_PROJ], NULL, y, m->D, m->threads);
    mc_cpu_out_bias(M, m->D, args->mask, m->w[M2C_OUT_PROJ_BIAS], y);
    mc_cpu_f32io_out(&io, args->y);
    if (cache)
        cache->primed = 1;

cleanup:
    mc_cpu_rows_free(&rows);
    free(scratch);
    free(gram);
    free(gram_off);
    free(n_real);
    free(idx);
    free(hn);
    free(dt);
    free(xbc);
    free(zx);
    mc_cpu_f32io_free(&io);
    return st;
}

enum mc_backend_status mc_mamba2_cpu_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                    const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    float *zx = NULL, *xbc = NULL, *dt = NULL, *hn = NULL, *scratch = NULL, *gram = NULL;
    int64_t *idx = NULL, *tok_seq = NULL;
    int64_t T = 0;

    if ((st = mc_cpu_packed_check(model, pool, args, M2C_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK; /* only zero-length sequences: nothing changes */

    const int64_t Q = m->chunk < T ? m->chunk : T;
    const int64_t core_tasks = m2c_core_tasks(m, 1);
    const int workers = (int)(m->threads < core_tasks ? m->threads : core_tasks);
    const size_t scratch_elems = m2c_scratch_elems(m, Q);
    const int64_t nch = T > 1 ? (T + Q - 1) / Q : 0, n_gram = m->G * nch;
    const int64_t n_real = T, gram_off = 0;

    /* every allocation before the pool is touched, so a failure leaves it unchanged */
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, T * m->D);
    zx = malloc((size_t)(T * m->proj) * sizeof *zx);
    xbc = malloc((size_t)(T * m->C) * sizeof *xbc);
    dt = malloc((size_t)(T * m->H) * sizeof *dt);
    hn = malloc((size_t)(T * m->inner) * sizeof *hn);
    idx = malloc((size_t)T * sizeof *idx);
    tok_seq = malloc((size_t)T * sizeof *tok_seq);
    scratch = malloc((size_t)workers * scratch_elems * sizeof *scratch);
    if (io_nomem || !zx || !xbc || !dt || !hn || !idx || !tok_seq || !scratch) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu forward_packed: out of memory for T=%lld scratch",
                         (long long)T);
        goto cleanup;
    }
    /* the shared C·Bᵀ per (group, chunk) of the packed grid; per head when it does not fit */
    if (m->R > 1 && n_gram > 0 && (size_t)(n_gram * Q * Q) <= M2C_GRAM_MAX_BYTES / sizeof(float))
        gram = malloc((size_t)(n_gram * Q * Q) * sizeof *gram);
    mc_cpu_packed_reset(&m->cache_shape, pool, args);

    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    for (int64_t t = 0; t < T; t++)
        idx[t] = t;
    mc_cpu_packed_token_seq(args, tok_seq);

    /* as a forward of one row of T tokens (projections, SiLU/dt, Gram, norm), with the conv and the
     * core restarting at every sequence boundary */
    struct m2c_run run = {
        .m = m,
        .batch = 1,
        .len = T,
        .Q = Q,
        .zx = zx,
        .xbc = xbc,
        .dt = dt,
        .hn = hn,
        .window = pool->window,
        .state = pool->state,
        .idx = idx,
        .n_real = &n_real,
        .gram = gram,
        .gram_off = &gram_off,
        .scratch = scratch,
        .scratch_elems = scratch_elems,
        .pk = args,
        .tok_seq = tok_seq,
    };
    const int64_t row_blocks = (T + M2C_ROW_BLOCK - 1) / M2C_ROW_BLOCK;

    mc_cpu_linear_tiled(T, m->proj, m->D, x, m->D, m->w[M2C_IN_PROJ], m->w[M2C_IN_PROJ_BIAS], zx, m->proj,
                        m->threads);
    mc_cpu_parallel_for(args->n_seqs * m2c_conv_blocks(m->C), m2c_packed_conv_task, &run, m->threads);
    mc_cpu_parallel_for(row_blocks, m2c_silu_dt_task, &run, m->threads);
    if (gram)
        mc_cpu_parallel_for(n_gram, m2c_gram_task, &run, workers);
    mc_cpu_parallel_for(core_tasks, m2c_packed_core_task, &run, workers);
    mc_cpu_parallel_for(row_blocks, m2c_norm_task, &run, m->threads);
    mc_cpu_linear_tiled(T, m->D, m->inner, hn, m->inner, m->w[M2C_OUT_PROJ], NULL, y, m->D, m->threads);
    mc_cpu_out_bias(T, m->D, NULL, m->w[M2C_OUT_PROJ_BIAS], y);
    mc_cpu_f32io_out(&io, args->y);
    pool->primed = 1;

cleanup:
    free(scratch);
    free(gram);
    free(tok_seq);
    free(idx);
    free(hn);
    free(dt);
    free(xbc);
    free(zx);
    mc_cpu_f32io_free(&io);
    return st;
}

/* ---- the core alone (cpu.h: mc_cpu_mamba2_core) ----------------------------------------------- */

/* Conv + SiLU of one batch row of the core-only entry (the forward's conv task reads in_proj rows). */
struct m2c_core_conv {
    const struct mc_cpu_mamba2_core_args *a;
    int64_t C;
    const float *conv_kc;
    float *window; /* [B][K][C] */
    float *xbc;    /* [B][L][C] */
};

static void m2c_core_conv_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct m2c_core_conv *cc = ctx;
    const int64_t L = cc->a->len, C = cc->C, K = cc->a->conv_kernel, nb = m2c_conv_blocks(C);
    const int64_t b = task / nb, c0 = task % nb * MC_CPU_CONV_COLS;
    const int64_t c1 = c0 + MC_CPU_CONV_COLS < C ? c0 + MC_CPU_CONV_COLS : C;
    mc_cpu_conv_cols(L, C, c0, c1, K, cc->a->xbc + b * L * C, C, NULL, cc->window + b * K * C, cc->conv_kc, NULL, 1,
                     cc->xbc + b * L * C, C);
}

/* One block of a long core call (stream.h: mc_cpu_core_blocks): row b, tokens [t0, t0 + n). */
static enum mc_backend_status m2c_core_block(const void *args, int64_t b, int64_t t0, int64_t n, float *window,
                                             struct mc_msg *msg)
{
    const struct mc_cpu_mamba2_core_args *a = args;
    const int64_t inner = a->heads * a->head_dim, C = inner + 2 * a->groups * a->state_size, row = b * a->len + t0;
    struct mc_cpu_mamba2_core_args blk = *a;
    blk.batch = 1;
    blk.len = n;
    blk.xbc = a->xbc + row * C;
    blk.dt = a->dt + row * a->heads;
    blk.y = a->y + row * inner;
    blk.state = a->state + b * inner * a->state_size;
    blk.window = window;
    return mc_cpu_mamba2_core(&blk, msg);
}

enum mc_backend_status mc_cpu_mamba2_core(const struct mc_cpu_mamba2_core_args *a, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    float *conv_kc = NULL, *window = NULL, *xbc = NULL, *a_neg = NULL, *dskip = NULL, *scratch = NULL, *gram = NULL;
    int64_t *idx = NULL, *n_real = NULL, *gram_off = NULL;
    if (!a || !a->xbc || !a->dt || !a->a || !a->state || !a->y)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID, "mamba2 cpu core: needs xbc, dt, a, state and y");
    if (a->batch < 1 || a->len < 1 || a->heads < 1 || a->head_dim < 1 || a->state_size < 1 || a->groups < 1 ||
        a->conv_kernel < 1 || a->conv_kernel > MC_CPU_CONV_MAX_K || a->chunk < 0 || a->heads % a->groups != 0 ||
        a->heads > M2C_MAX_DIM || a->head_dim > M2C_MAX_DIM || a->state_size > M2C_MAX_DIM ||
        a->batch > INT_MAX / a->len)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "mamba2 cpu core: bad shape B=%lld L=%lld H=%lld P=%lld N=%lld G=%lld K=%lld chunk=%lld",
                           (long long)a->batch, (long long)a->len, (long long)a->heads, (long long)a->head_dim,
                           (long long)a->state_size, (long long)a->groups, (long long)a->conv_kernel,
                           (long long)a->chunk);
    const int64_t block = mc_cpu_stream_tokens(a->chunk > 0 ? a->chunk : M2C_DEFAULT_CHUNK);
    if (a->len > block)
        return mc_cpu_core_blocks(a, a->batch, a->len, block, a->window,
                                  (size_t)(a->conv_kernel * (a->heads * a->head_dim + 2 * a->groups * a->state_size)),
                                  a->conv_weight != NULL, m2c_core_block, "mamba2 cpu core", msg);
    struct mc_model m = {0};
    m.H = a->heads;
    m.P = a->head_dim;
    m.N = a->state_size;
    m.G = a->groups;
    m.K = a->conv_kernel;
    m.inner = m.H * m.P;
    m.GN = m.G * m.N;
    m.C = m.inner + 2 * m.GN;
    m.R = m.H / m.G;
    m.chunk = a->chunk > 0 ? a->chunk : M2C_DEFAULT_CHUNK;
    m.threads = mc_cpu_threads_resolve(a->threads);
    const int64_t Bsz = a->batch, L = a->len, M = Bsz * L, Q = m.chunk < L ? m.chunk : L;
    const int64_t core_tasks = m2c_core_tasks(&m, Bsz);
    const int workers = (int)(m.threads < core_tasks ? m.threads : core_tasks);
    const size_t scratch_elems = m2c_scratch_elems(&m, Q);

    a_neg = malloc((size_t)m.H * sizeof *a_neg);
    dskip = calloc((size_t)m.H, sizeof *dskip);
    idx = malloc((size_t)M * sizeof *idx);
    n_real = malloc((size_t)Bsz * sizeof *n_real);
    gram_off = malloc((size_t)Bsz * sizeof *gram_off);
    scratch = malloc((size_t)workers * scratch_elems * sizeof *scratch);
    if (a->conv_weight) {
        conv_kc = malloc((size_t)(m.K * m.C) * sizeof *conv_kc);
        xbc = malloc((size_t)(M * m.C) * sizeof *xbc);
        window = a->window ? a->window : calloc((size_t)(Bsz * m.K * m.C), sizeof *window);
    }
    if (!a_neg || !dskip || !idx || !n_real || !gram_off || !scratch || (a->conv_weight && (!conv_kc || !xbc || !window))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "mamba2 cpu core: out of memory for B=%lld L=%lld", (long long)Bsz,
                         (long long)L);
        goto cleanup;
    }
    memcpy(a_neg, a->a, (size_t)m.H * sizeof *a_neg);
    if (a->d)
        memcpy(dskip, a->d, (size_t)m.H * sizeof *dskip);
    m.a_neg = a_neg;
    m.w[M2C_D] = dskip;
    for (int64_t b = 0; b < Bsz; b++) {
        for (int64_t t = 0; t < L; t++)
            idx[b * L + t] = t;
        n_real[b] = L;
        gram_off[b] = 0;
    }
    if (a->conv_weight) {
        mc_cpu_conv_weight_kc(m.C, m.K, a->conv_weight, conv_kc);
        struct m2c_core_conv cc = {.a = a, .C = m.C, .conv_kc = conv_kc, .window = window, .xbc = xbc};
        mc_cpu_parallel_for(Bsz * m2c_conv_blocks(m.C), m2c_core_conv_task, &cc, m.threads);
    }
    /* the shared C·Bᵀ per (row, group, chunk), as in the forward; per head when it does not fit */
    const int64_t nch = L > 1 ? (L + Q - 1) / Q : 0, n_gram = Bsz * m.G * nch;
    for (int64_t b = 0; b < Bsz; b++)
        gram_off[b] = b * m.G * nch * Q * Q;
    if (m.R > 1 && n_gram > 0 && (size_t)(n_gram * Q * Q) <= M2C_GRAM_MAX_BYTES / sizeof(float))
        gram = malloc((size_t)(n_gram * Q * Q) * sizeof *gram);
    struct m2c_run run = {
        .m = &m,
        .batch = Bsz,
        .len = L,
        .Q = Q,
        .xbc = a->conv_weight ? xbc : (float *)(uintptr_t)a->xbc, /* read only */
        .dt = (float *)(uintptr_t)a->dt,                          /* read only */
        .hn = a->y,
        .state = a->state,
        .idx = idx,
        .n_real = n_real,
        .gram = gram,
        .gram_off = gram_off,
        .scratch = scratch,
        .scratch_elems = scratch_elems,
    };
    if (gram)
        mc_cpu_parallel_for(n_gram, m2c_gram_task, &run, workers);
    mc_cpu_parallel_for(core_tasks, m2c_core_task, &run, workers);

cleanup:
    if (window != a->window)
        free(window);
    free(xbc);
    free(conv_kc);
    free(gram);
    free(scratch);
    free(gram_off);
    free(n_real);
    free(idx);
    free(dskip);
    free(a_neg);
    return st;
}
