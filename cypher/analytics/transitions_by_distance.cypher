// Evidence of every TRANSITION edge at every prefix distance k, from the steps that used it:
// a step whose prefix (most recent first) holds p at position k and that chose g used
// p -> g at distance k. Success: the step raised the run's best speedup (reward > 0);
// gain: its positive reward. Rows with fewer than $min_count observations are left out.
MATCH (s:Step)
WHERE s.global_id IS NOT NULL
UNWIND range(0, size(s.prefix) - 1) AS i
WITH s.prefix[i] AS source, s.global_id AS target, i + 1 AS distance, s.reward AS reward
WITH source, target, distance, count(*) AS observations,
     sum(CASE WHEN reward > 0 THEN 1 ELSE 0 END) AS successes, sum(reward) AS reward_sum,
     sum(CASE WHEN reward > 0 THEN reward ELSE 0.0 END) AS gain_sum
WHERE observations >= $min_count
RETURN source, target, distance, observations, successes, reward_sum, gain_sum
ORDER BY source, target, distance
