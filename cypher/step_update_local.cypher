// Statistics and bounded evidence lists (JSON strings, newest first) of the chosen local.
MATCH (l:Local {id: $local_id})
SET l.attempts = l.attempts + 1,
    l.successes = l.successes + $success,
    l.reward_sum = l.reward_sum + $reward,
    l.compile_failures = l.compile_failures + $compile_failure,
    l.incorrect = l.incorrect + $incorrect,
    l.positive = CASE WHEN $positive THEN ([$evidence] + l.positive)[0..$max_evidence] ELSE l.positive END,
    l.negative = CASE WHEN $positive THEN l.negative ELSE ([$evidence] + l.negative)[0..$max_evidence] END
RETURN l.id AS id
