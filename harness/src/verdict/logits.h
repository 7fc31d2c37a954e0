/*
 * logits.h — metrics of a logits comparison (docs/models.md §4), over positions (rows of V
 * logits): top-1 agreement, top-k overlap, KL(golden || candidate) mean and max, and the largest
 * difference of the log-probability of the golden's top token; and the top-k helpers of greedy
 * generation (vLLM's check_logprobs_close rule). They describe; the verdict of a logits tensor is its
 * elementwise tolerance (compare.h), and greedy generation's is the top-k rule.
 */
#ifndef MC_LOGITS_H
#define MC_LOGITS_H

#include <stdint.h>

#define MC_LOGITS_TOPK 5 /* k of the top-k overlap metric */

struct mc_logits_metrics {
    int present;             /* 1 on tensors that compare logits */
    int64_t positions;       /* compared positions */
    int64_t top1_agree;      /* positions whose argmax agrees */
    double topk_overlap_sum; /* sum over positions of |top-k(a) ∩ top-k(b)| / k */
    double kl_sum, kl_max;   /* KL(golden || candidate) in nats */
    double logprob_diff_max; /* max |log p_cand(t) - log p_gold(t)|, t the golden's top token */
    int64_t worst_kl_token;  /* token position of kl_max (-1 when none) */
};

void mc_logits_metrics_init(struct mc_logits_metrics *m);

/* Accumulates rows [n][V] of candidate and golden logits; valid[i] == 0 skips row i (valid may be
 * NULL); token[i] is row i's token position (for worst_kl_token; may be NULL). A row with a
 * non-finite candidate logit counts as disagreeing, with KL +inf. */
void mc_logits_accumulate(const double *cand, const double *gold, int64_t n, int64_t V, const uint8_t *valid,
                          const int64_t *token, struct mc_logits_metrics *m);
void mc_logits_merge(struct mc_logits_metrics *into, const struct mc_logits_metrics *from);

double mc_logits_top1_rate(const struct mc_logits_metrics *m);
double mc_logits_topk_overlap(const struct mc_logits_metrics *m);
double mc_logits_kl_mean(const struct mc_logits_metrics *m);

/* The index of the largest of row [V] (the lowest index among equals; NaN never wins). */
int64_t mc_logits_argmax(const double *row, int64_t V);
/* 1 when token `t` is among the k largest of row [V] (ties broken towards the lower index). */
int mc_logits_in_topk(const double *row, int64_t V, int64_t t, int64_t k);

#endif
