-- +goose Up
-- The labelled pairs of the tasks people decided before 00011 stored them
-- with each decision: the same pair arbiter.LabelledPairOf makes, from the
-- agent's last attempt with a verdict and a confidence and the person's
-- decision (weight 1: no audits were made before 00011). The bucket is
-- arbiter.ConfidenceBucketOf's floor(100c + 1e-9), by a cast, which
-- truncates: the same for a confidence from 0 to 1. A task with a pair
-- already keeps it. (WHERE is required before ON CONFLICT in an
-- INSERT … SELECT.)
INSERT INTO labelled_pairs (task_id, account_id, task_type, source, model, confidence, bucket,
    agent_verdict, human_verdict, correct, audit, weight, created_at, labelled_at)
SELECT t.id, t.account_id, t.task_type, t.source, COALESCE(a.model, ''), a.confidence,
    min(max(CAST(a.confidence * 100 + 1e-9 AS INTEGER), 0), 100),
    a.verdict, h.verdict, CASE WHEN a.verdict = h.verdict THEN 1 ELSE 0 END, 0, 1.0, t.created_at, h.started_at
FROM tasks t
JOIN attempts a ON a.id = (SELECT max(id) FROM attempts
    WHERE task_id = t.id AND tier = 'agent' AND verdict IS NOT NULL AND confidence IS NOT NULL)
JOIN attempts h ON h.id = (SELECT max(id) FROM attempts
    WHERE task_id = t.id AND tier = 'human' AND verdict IS NOT NULL AND NOT audit)
WHERE t.status = 'completed' AND t.final_tier = 'human'
ON CONFLICT (task_id) DO NOTHING;

-- +goose Down
-- The pairs stay: from here on they are indistinguishable from the ones
-- decisions stored.
SELECT 1;
