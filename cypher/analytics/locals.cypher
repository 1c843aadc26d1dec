// Local strategies (of one global, or of all when $global_id is null) with at least
// $min_count attempts: runtime statistics, outcome counters, and how many positive and
// negative evidence entries each keeps.
MATCH (l:Local)
WHERE ($global_id IS NULL OR l.global_id = $global_id) AND l.attempts >= $min_count
RETURN l.id AS id, l.global_id AS global_id, l.name AS name, l.attempts AS attempts,
       l.successes AS successes, l.reward_sum AS reward_sum,
       l.compile_failures AS compile_failures, l.incorrect AS incorrect, l.rejected AS rejected,
       l.timeouts AS timeouts, l.runtime_errors AS runtime_errors,
       l.generation_failures AS generation_failures,
       size(l.positive) AS positive, size(l.negative) AS negative
ORDER BY id
