/* logits.c — see logits.h. */
#include "verdict/logits.h"

#include <math.h>
#include <string.h>

void mc_logits_metrics_init(struct mc_logits_metrics *m)
{
    memset(m, 0, sizeof *m);
    m->present = 1;
    m->worst_kl_token = -1;
}

int64_t mc_logits_argmax(const double *row, int64_t V)
{
    int64_t best = -1;
    for (int64_t v = 0; v < V; v++)
        if (!isnan(row[v]) && (best < 0 || row[v] > row[best]))
            best = v;
    return best < 0 ? 0 : best;
}

/* Rank of token t: how many entries come before it (larger, or equal with a lower index). */
static int64_t rank_of(const double *row, int64_t V, int64_t t)
{
    int64_t r = 0;
    if (isnan(row[t]))
        return V;
    for (int64_t v = 0; v < V; v++)
        if (v != t && !isnan(row[v]) && (row[v] > row[t] || (row[v] == row[t] && v < t)))
            r++;
    return r;
}

int mc_logits_in_topk(const double *row, int64_t V, int64_t t, int64_t k)
{
    return t >= 0 && t < V && rank_of(row, V, t) < k;
}

/* The k largest of row [V] (ties towards the lower index), k <= MC_LOGITS_TOPK, largest first; NaN never
 * taken, -1 where fewer than k values are not NaN. One pass keeping the k best in order: an entry moves
 * down only for a strictly larger value, so of equal values the lower index stays first. */
static void top_k(const double *row, int64_t V, int64_t k, int64_t *out)
{
    int64_t kept = 0;
    for (int64_t v = 0; v < V; v++) {
        if (isnan(row[v]) || (kept == k && !(row[v] > row[out[k - 1]])))
            continue;
        int64_t at = kept < k ? kept++ : k - 1;
        while (at > 0 && row[v] > row[out[at - 1]]) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = v;
    }
    for (int64_t i = kept; i < k; i++)
        out[i] = -1;
}

/* log-softmax normaliser: max + log(sum exp(x - max)). */
static double log_norm(const double *row, int64_t V)
{
    double mx = -INFINITY, s = 0.0;
    for (int64_t v = 0; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    for (int64_t v = 0; v < V; v++)
        s += exp(row[v] - mx);
    return mx + log(s);
}

void mc_logits_accumulate(const double *cand, const double *gold, int64_t n, int64_t V, const uint8_t *valid,
                          const int64_t *token, struct mc_logits_metrics *m)
{
    int64_t k = V < MC_LOGITS_TOPK ? V : MC_LOGITS_TOPK;
    for (int64_t i = 0; i < n; i++) {
        if (valid != NULL && !valid[i])
            continue;
        const double *a = cand + i * V, *b = gold + i * V;
        int finite = 1;
        for (int64_t v = 0; v < V && finite; v++)
            finite = isfinite(a[v]);
        m->positions++;
        int64_t tg = mc_logits_argmax(b, V);
        double kl = INFINITY, dlp = INFINITY;
        if (finite) {
            m->top1_agree += mc_logits_argmax(a, V) == tg;
            int64_t overlap = 0, ta[MC_LOGITS_TOPK], tb[MC_LOGITS_TOPK];
            top_k(a, V, k, ta);
            top_k(b, V, k, tb);
            for (int64_t i2 = 0; i2 < k; i2++)
                for (int64_t j = 0; j < k; j++)
                    overlap += ta[i2] == tb[j];
            m->topk_overlap_sum += (double)overlap / (double)k;
            double za = log_norm(a, V), zb = log_norm(b, V);
            kl = 0.0;
            for (int64_t v = 0; v < V; v++) {
                double lpb = b[v] - zb, lpa = a[v] - za;
                kl += exp(lpb) * (lpb - lpa);
            }
            kl = kl < 0.0 ? 0.0 : kl; /* rounding below zero */
            dlp = fabs((a[tg] - za) - (b[tg] - zb));
        }
        m->kl_sum += kl;
        if (!(kl <= m->kl_max)) {
            m->kl_max = kl;
            m->worst_kl_token = token ? token[i] : i;
        }
        if (!(dlp <= m->logprob_diff_max))
            m->logprob_diff_max = dlp;
    }
}

void mc_logits_merge(struct mc_logits_metrics *into, const struct mc_logits_metrics *from)
{
    if (!from->present)
        return;
    if (!into->present) {
        *into = *from;
        return;
    }
    into->positions += from->positions;
    into->top1_agree += from->top1_agree;
    into->topk_overlap_sum += from->topk_overlap_sum;
    into->kl_sum += from->kl_sum;
    if (!(from->kl_max <= into->kl_max)) {
        into->kl_max = from->kl_max;
        into->worst_kl_token = from->worst_kl_token;
    }
    if (!(from->logprob_diff_max <= into->logprob_diff_max))
        into->logprob_diff_max = from->logprob_diff_max;
}

double mc_logits_top1_rate(const struct mc_logits_metrics *m)
{
    return m->positions ? (double)m->top1_agree / (double)m->positions : 1.0;
}

double mc_logits_topk_overlap(const struct mc_logits_metrics *m)
{
    return m->positions ? m->topk_overlap_sum / (double)m->positions : 1.0;
}

double mc_logits_kl_mean(const struct mc_logits_metrics *m)
{
    return m->positions ? m->kl_sum / (double)m->positions : 0.0;
}
