// Runtime statistics of the chosen global. Each SET reads the property it writes, so
// Neo4j takes the write lock before reading: concurrent steps lose no increments.
// $c: the outcome counters this step moves (memory/outcome.py).
MATCH (g:Global {id: $global_id})
SET g.attempts = g.attempts + 1,
    g.reward_sum = g.reward_sum + $reward,
    g.successes = g.successes + $c.successes,
    g.compile_failures = g.compile_failures + $c.compile_failures,
    g.incorrect = g.incorrect + $c.incorrect,
    g.rejected = g.rejected + $c.rejected,
    g.timeouts = g.timeouts + $c.timeouts,
    g.runtime_errors = g.runtime_errors + $c.runtime_errors,
    g.generation_failures = g.generation_failures + $c.generation_failures,
    g.trend = $decay * g.trend + (1.0 - $decay) * $reward
RETURN g.id AS id
