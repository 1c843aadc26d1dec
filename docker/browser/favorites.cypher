// Saved queries (favourites) of the HTAM memory for Neo4j Browser. Each query starts with
// a comment line that names it and ends with a semicolon. The guide (guide.html) shows
// them; favorites.zip, served next to it, holds one file per query for the Browser's
// Favorites import (docs/analytics.md).

// The HTG: globals and their strategies
MATCH p = (:Global)-[:HAS_LOCAL]->(:Local)
RETURN p;

// The HTG: transitions with evidence
// Edge captions count observations (a step counts once per prefix distance it used the edge).
MATCH p = (:Global)-[e:TRANSITION]->(:Global)
WHERE e.n > 0
RETURN p;

// Transition success rates
// Edges with evidence, best first: observations, the share that raised the run's best
// speedup with its 95% Wilson interval, mean reward and gain (`htam stats transitions`).
MATCH (a:Global)-[e:TRANSITION]->(b:Global)
WHERE e.n > 0
WITH a, b, e, 1.959963984540054 AS z, 1.0 * e.successes / e.n AS p
WITH a, b, e, p, (p + z ^ 2 / (2 * e.n)) / (1 + z ^ 2 / e.n) AS centre,
     z / (1 + z ^ 2 / e.n) * sqrt(p * (1 - p) / e.n + z ^ 2 / (4 * e.n ^ 2)) AS half
RETURN a.id AS source, b.id AS target, e.n AS observations, round(p, 3) AS success_rate,
       round(centre - half, 3) AS ci_low, round(centre + half, 3) AS ci_high,
       round(e.reward_sum / e.n, 3) AS mean_reward, round(e.gain_sum / e.n, 3) AS mean_gain
ORDER BY ci_low DESC, observations DESC, source, target
LIMIT 50;

// Transitions by prefix distance
// Each edge at each distance k (1: the previous step's global), from the steps that used
// it (`htam stats transitions --by-distance`).
MATCH (s:Step)
WHERE s.global_id IS NOT NULL
UNWIND range(0, size(s.prefix) - 1) AS i
WITH s.prefix[i] AS source, s.global_id AS target, i + 1 AS k, s.reward AS reward
WITH source, target, k, count(*) AS n, sum(CASE WHEN reward > 0 THEN 1 ELSE 0 END) AS successes,
     sum(reward) AS reward_sum
RETURN source, target, k, n AS observations, round(1.0 * successes / n, 3) AS success_rate,
       round(reward_sum / n, 3) AS mean_reward
ORDER BY source, target, k;

// Global directions
// Attempts, success rate, mean reward and reward trend of every global (`htam stats globals`).
MATCH (g:Global)
RETURN g.id AS global, g.attempts AS attempts,
       CASE WHEN g.attempts > 0 THEN round(1.0 * g.successes / g.attempts, 3) END AS success_rate,
       CASE WHEN g.attempts > 0 THEN round(g.reward_sum / g.attempts, 3) END AS mean_reward,
       round(g.trend, 3) AS trend, COUNT { (g)-[:HAS_LOCAL]->(:Local) } AS locals
ORDER BY attempts DESC, global;

// The graph on real nodes
// A run that chose directions, with its task, its steps and the globals and locals they
// chose: every kind of node, each captioned by what names it (the style's captions).
MATCH (r:Run)
WHERE EXISTS { (r)-[:HAS_STEP]->(:Step)-[:CHOSE_LOCAL]->(:Local) }
WITH r ORDER BY r.started_at DESC LIMIT 1
MATCH p = (:Task)<-[:ON_TASK]-(r)-[:HAS_STEP]->(s:Step)
OPTIONAL MATCH q = (s)-[:CHOSE_GLOBAL]->(:Global)-[:HAS_LOCAL]->(l:Local)
WHERE (s)-[:CHOSE_LOCAL]->(l)
RETURN p, q;

// The newest run of each method as a path
// Its task, its steps (linked by NEXT) and the global each chose (none for the methods
// without directions: feedback, vanilla, flat).
MATCH (r:Run)
WITH r ORDER BY r.started_at DESC
WITH r.method AS method, collect(r)[0] AS r
MATCH p = (:Task)<-[:ON_TASK]-(r)-[:HAS_STEP]->(s:Step)
OPTIONAL MATCH q = (s)-[:CHOSE_GLOBAL]->(:Global)
RETURN p, q;

// The newest run of each method, step by step
// What each step chose: its global and local, or, for a method that chooses none, what it
// does instead.
MATCH (r:Run)
WITH r ORDER BY r.started_at DESC
WITH r.method AS method, collect(r)[0] AS r
MATCH (r)-[:HAS_STEP]->(s:Step)
WITH method, r, s, CASE method
       WHEN 'feedback' THEN '(none: refines the last kernel from its feedback)'
       WHEN 'vanilla' THEN '(none: one-shot generation)'
       ELSE '(none chosen)' END AS none
RETURN method, r.id AS run, s.index + 1 AS step, coalesce(s.global_id, none) AS global,
       coalesce(s.local_id, none) AS local, s.verdict AS verdict, round(s.speedup, 3) AS speedup,
       round(s.reward, 3) AS reward
ORDER BY method, step;

// Methods compared
// Per method: runs, the share with a correct candidate, the geometric-mean best speedup
// (a run's fastest correct candidate's) over eager PyTorch (1.0 without a correct one) and
// the steps' success rate (`htam stats runs --by-method`).
MATCH (r:Run)
OPTIONAL MATCH (r)-[:HAS_STEP]->(s:Step)
WITH r, count(s) AS steps, max(CASE WHEN s.verdict = 'ok' THEN s.speedup END) AS best,
     sum(CASE WHEN s.verdict = 'ok' THEN 1 ELSE 0 END) AS ok,
     sum(CASE WHEN s.reward > 0 THEN 1 ELSE 0 END) AS successes
RETURN r.method AS method, count(r) AS runs, round(avg(CASE WHEN ok > 0 THEN 1.0 ELSE 0.0 END), 3) AS correct,
       round(exp(avg(log(coalesce(best, 1.0)))), 3) AS geomean_speedup, sum(steps) AS steps,
       CASE WHEN sum(steps) > 0 THEN round(1.0 * sum(successes) / sum(steps), 3) END AS success_rate
ORDER BY method;
