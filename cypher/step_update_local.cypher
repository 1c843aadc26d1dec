// Statistics and bounded evidence lists (JSON strings, newest first) of the chosen local.
// $c: the outcome counters this step moves (memory/outcome.py).
MATCH (l:Local {id: $local_id})
SET l.attempts = l.attempts + 1,
    l.reward_sum = l.reward_sum + $reward,
    l.successes = l.successes + $c.successes,
    l.compile_failures = l.compile_failures + $c.compile_failures,
    l.incorrect = l.incorrect + $c.incorrect,
    l.rejected = l.rejected + $c.rejected,
    l.timeouts = l.timeouts + $c.timeouts,
    l.runtime_errors = l.runtime_errors + $c.runtime_errors,
    l.generation_failures = l.generation_failures + $c.generation_failures,
    l.positive = CASE WHEN $positive THEN ([$evidence] + l.positive)[0..$max_evidence] ELSE l.positive END,
    l.negative = CASE WHEN $positive THEN l.negative ELSE ([$evidence] + l.negative)[0..$max_evidence] END
RETURN l.id AS id
