// TRANSITION evidence from every prefix element to the chosen global, at its distance.
// One row per distinct source; dn/dr hold the count/reward added at each distance.
UNWIND $edges AS ed
MATCH (a:Global {id: ed.source}), (g:Global {id: $global_id})
MERGE (a)-[e:TRANSITION]->(g)
ON CREATE SET e.n = 0, e.reward_sum = 0.0, e.gain_sum = 0.0, e.successes = 0,
              e.compile_failures = 0, e.incorrect = 0, e.when = '', e.rationale = '',
              e.risks = [], e.n_by_k = $zeros_int, e.reward_by_k = $zeros_float
SET e.n = e.n + ed.count,
    e.reward_sum = e.reward_sum + ed.reward,
    e.gain_sum = e.gain_sum + ed.gain,
    e.successes = e.successes + ed.successes,
    e.compile_failures = e.compile_failures + ed.compile_failures,
    e.incorrect = e.incorrect + ed.incorrect,
    e.n_by_k = [i IN range(0, size(e.n_by_k) - 1) | e.n_by_k[i] + ed.dn[i]],
    e.reward_by_k = [i IN range(0, size(e.reward_by_k) - 1) | e.reward_by_k[i] + ed.dr[i]]
RETURN count(e) AS n
