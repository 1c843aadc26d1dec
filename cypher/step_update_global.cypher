// Runtime statistics of the chosen global. Each SET reads the property it writes, so
// Neo4j takes the write lock before reading: concurrent steps lose no increments.
MATCH (g:Global {id: $global_id})
SET g.attempts = g.attempts + 1,
    g.successes = g.successes + $success,
    g.reward_sum = g.reward_sum + $reward,
    g.compile_failures = g.compile_failures + $compile_failure,
    g.incorrect = g.incorrect + $incorrect,
    g.trend = $decay * g.trend + (1.0 - $decay) * $reward
RETURN g.id AS id
