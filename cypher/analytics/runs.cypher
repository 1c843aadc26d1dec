// Runs with at least $min_count steps: the run's header and what its steps add up to.
// ok: correct candidates; successes: steps that raised the run's best speedup; best: the
// run's best: its fastest correct candidate's speedup over eager PyTorch (null: none correct;
// memory.models.best_step); config: the run's configuration as JSON (its llm and
// scoring.reward_from are read from it).
MATCH (r:Run)
OPTIONAL MATCH (r)-[:HAS_STEP]->(s:Step)
WITH r, count(s) AS steps, sum(CASE WHEN s.verdict = 'ok' THEN 1 ELSE 0 END) AS ok,
     sum(CASE WHEN s.reward > 0 THEN 1 ELSE 0 END) AS successes,
     sum(coalesce(s.reward, 0.0)) AS reward_sum,
     max(CASE WHEN s.verdict = 'ok' THEN s.speedup END) AS best
WHERE steps >= $min_count
RETURN r.id AS run_id, r.task_id AS task_id, r.method AS method, r.seed AS seed,
       r.started_at AS started_at, steps, ok, successes, reward_sum,
       best AS best_speedup, r.config AS config
ORDER BY run_id
