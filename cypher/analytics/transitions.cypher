// TRANSITION edges with at least $min_count observations: their pooled evidence (an edge
// seen at two prefix distances of one step counts twice) and outcome counters, with the
// seeded prior. htam_graph.analytics derives rates, Wilson intervals and means.
MATCH (a:Global)-[e:TRANSITION]->(b:Global)
WHERE e.n >= $min_count
RETURN a.id AS source, b.id AS target, e.n AS observations, e.successes AS successes,
       e.reward_sum AS reward_sum, e.gain_sum AS gain_sum,
       e.compile_failures AS compile_failures, e.incorrect AS incorrect, e.rejected AS rejected,
       e.timeouts AS timeouts, e.runtime_errors AS runtime_errors,
       e.generation_failures AS generation_failures, e.prior AS prior, e.prior_n AS prior_n
ORDER BY source, target
