// Transition-attended scores of every :Global for a prefix of recent globals, conditioned
// on the evidence of the steps of tasks of operator family $family (null: pooled), of its
// tasks of shape class $shape_class only when that is not null.
// $prefix: global ids, most recent first, already truncated to K; $lam, $alpha, $beta.
//   B(g)    = (reward_sum + alpha * prior) / (attempts + alpha)
//   B_f(g)  = (R_f(g) + alpha * B(g)) / (n_f(g) + alpha)        B(g) when n_f(g) = 0
//   a_k     = exp(-lam*(k-1)) / sum_j exp(-lam*(j-1))
//   U0(e)   = (R(e) + m(e) * pi(e) + alpha * B_f(g)) / (n(e) + m(e) + alpha)   (m = prior_n, pi = prior)
//   U0_f(e) = (R_f(e) + alpha * U0(e)) / (n_f(e) + alpha)        U0(e) when n_f(e) = 0
//   U_k(e)  = (R_k(e) + alpha * U0_f(e)) / (n_k(e) + alpha);  a missing edge gives B_f(g)
//   S(g)    = beta * B_f(g) + sum_k a_k * U_k(p_k -> g)
// n_f, R_f: the family's steps that chose g (and, for an edge, had its source in their
// prefix, once per distance), found by (:Task).family and (:Step).task_id (both indexed).
WITH $prefix AS prefix,
     reduce(z = 0.0, j IN range(0, size($prefix) - 1) | z + exp(-$lam * j)) AS norm
MATCH (g:Global)
WITH g, prefix, norm,
     (g.reward_sum + $alpha * g.prior) / (g.attempts + $alpha) AS pooled
CALL (g) {
  OPTIONAL MATCH (t:Task {family: $family})
  WHERE $shape_class IS NULL OR t.shape_class = $shape_class
  OPTIONAL MATCH (s:Step {task_id: t.id, global_id: g.id})
  RETURN count(s) AS nf, coalesce(sum(s.reward), 0.0) AS rf,
         collect([coalesce(s.prefix, []), s.reward]) AS fsteps
}
WITH g, prefix, norm, fsteps,
     CASE WHEN nf = 0 THEN pooled ELSE (rf + $alpha * pooled) / (nf + $alpha) END AS base
CALL (g, prefix, norm, base, fsteps) {
  UNWIND range(0, size(prefix) - 1) AS i
  OPTIONAL MATCH (:Global {id: prefix[i]})-[e:TRANSITION]->(g)
  WITH i, norm, base,
       coalesce(e.n, 0) AS n, coalesce(e.reward_sum, 0.0) AS r,
       coalesce(e.prior_n, 0.0) AS m, coalesce(e.prior, 0.0) AS prior_u,
       coalesce(e.n_by_k[i], 0) AS nk, coalesce(e.reward_by_k[i], 0.0) AS rk,
       [f IN fsteps WHERE f[1] IS NOT NULL | [size([x IN f[0] WHERE x = prefix[i]]), f[1]]] AS seen
  WITH i, norm, rk, nk, (r + m * prior_u + $alpha * base) / (n + m + $alpha) AS u0,
       reduce(c = 0, x IN seen | c + x[0]) AS nfe,
       reduce(c = 0.0, x IN seen | c + x[0] * x[1]) AS rfe
  WITH i, norm, rk, nk, CASE WHEN nfe = 0 THEN u0 ELSE (rfe + $alpha * u0) / (nfe + $alpha) END AS u0f
  RETURN coalesce(sum(exp(-$lam * i) / norm * (rk + $alpha * u0f) / (nk + $alpha)), 0.0) AS attended
}
RETURN g.id AS global_id, g.name AS name, base, attended AS transition,
       $beta * base + attended AS score
ORDER BY global_id
