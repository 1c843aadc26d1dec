// Transition-attended scores of every :Global for a prefix of recent globals.
// $prefix: global ids, most recent first, already truncated to K; $lam, $alpha, $beta.
//   B(g)   = (reward_sum + alpha * prior) / (attempts + alpha)
//   a_k    = exp(-lam*(k-1)) / sum_j exp(-lam*(j-1))
//   U0(e)  = (R(e) + m(e) * pi(e) + alpha * B(g)) / (n(e) + m(e) + alpha)   (m = prior_n, pi = prior)
//   U_k(e) = (R_k(e) + alpha * U0(e)) / (n_k(e) + alpha);  a missing edge gives B(g)
//   S(g)   = beta * B(g) + sum_k a_k * U_k(p_k -> g)
WITH $prefix AS prefix,
     reduce(z = 0.0, j IN range(0, size($prefix) - 1) | z + exp(-$lam * j)) AS norm
MATCH (g:Global)
WITH g, prefix, norm,
     (g.reward_sum + $alpha * g.prior) / (g.attempts + $alpha) AS base
CALL (g, prefix, norm, base) {
  UNWIND range(0, size(prefix) - 1) AS i
  OPTIONAL MATCH (:Global {id: prefix[i]})-[e:TRANSITION]->(g)
  WITH i, norm, base,
       coalesce(e.n, 0) AS n, coalesce(e.reward_sum, 0.0) AS r,
       coalesce(e.prior_n, 0.0) AS m, coalesce(e.prior, 0.0) AS prior_u,
       coalesce(e.n_by_k[i], 0) AS nk, coalesce(e.reward_by_k[i], 0.0) AS rk
  WITH i, norm, rk, nk, (r + m * prior_u + $alpha * base) / (n + m + $alpha) AS u0
  RETURN coalesce(sum(exp(-$lam * i) / norm * (rk + $alpha * u0) / (nk + $alpha)), 0.0) AS attended
}
RETURN g.id AS global_id, g.name AS name, base, attended AS transition,
       $beta * base + attended AS score
ORDER BY global_id
