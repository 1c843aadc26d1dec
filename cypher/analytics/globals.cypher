// Global directions with at least $min_count attempts: runtime statistics, outcome
// counters and how many local strategies each holds.
MATCH (g:Global)
WHERE g.attempts >= $min_count
RETURN g.id AS id, g.name AS name, g.prior AS prior, g.attempts AS attempts,
       g.successes AS successes, g.reward_sum AS reward_sum,
       g.compile_failures AS compile_failures, g.incorrect AS incorrect, g.rejected AS rejected,
       g.timeouts AS timeouts, g.runtime_errors AS runtime_errors,
       g.generation_failures AS generation_failures, g.trend AS trend,
       COUNT { (g)-[:HAS_LOCAL]->(:Local) } AS locals
ORDER BY id
