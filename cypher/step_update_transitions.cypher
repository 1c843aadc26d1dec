// TRANSITION evidence from every prefix element to the chosen global, at its distance.
// One row per distinct source; dn/dr hold the count/reward added at each distance and
// ed.counters the outcome counters times the count; $note (the step's reflection, when
// it has one) goes first in the edge's bounded notes. $zero_edge as in upsert_transitions.
UNWIND $edges AS ed
MATCH (a:Global {id: ed.source}), (g:Global {id: $global_id})
MERGE (a)-[e:TRANSITION]->(g)
ON CREATE SET e += $zero_edge
SET e.n = e.n + ed.count,
    e.reward_sum = e.reward_sum + ed.reward,
    e.gain_sum = e.gain_sum + ed.gain,
    e.successes = e.successes + ed.counters.successes,
    e.compile_failures = e.compile_failures + ed.counters.compile_failures,
    e.incorrect = e.incorrect + ed.counters.incorrect,
    e.rejected = e.rejected + ed.counters.rejected,
    e.timeouts = e.timeouts + ed.counters.timeouts,
    e.runtime_errors = e.runtime_errors + ed.counters.runtime_errors,
    e.generation_failures = e.generation_failures + ed.counters.generation_failures,
    e.n_by_k = [i IN range(0, size(e.n_by_k) - 1) | e.n_by_k[i] + ed.dn[i]],
    e.reward_by_k = [i IN range(0, size(e.reward_by_k) - 1) | e.reward_by_k[i] + ed.dr[i]],
    e.notes = CASE WHEN $note = '' THEN e.notes ELSE ([$note] + e.notes)[0..$max_notes] END
RETURN count(e) AS n
