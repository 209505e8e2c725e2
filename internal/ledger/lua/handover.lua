-- handover.lua: deliver workflow hand-over records (written by another
-- queue's script, see workflow.lua) to the steps of this queue they name.
-- A record whose job id starts with WF_END is a step's end for its
-- workflow's record in this queue (wf_end). Idempotent: a record delivered
-- twice (a mover that crashed before its acknowledgement, the completer and
-- the maintenance leader racing) changes nothing the second time
-- (wf_deliver, wf_end).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 retention ms, then 3 values per record: step job id, the
--   dependency's step name, its end (succeeded | dead | cancelled | reopen)
-- Reply: {hand-over records this call wrote in turn (for this queue's own
--   dependents in other queues)}.
queue_guard()
seq_bump()
for i = 3, #ARGV, 3 do
  if string.sub(ARGV[i], 1, #WF_END) == WF_END then
    wf_end(string.sub(ARGV[i], #WF_END + 1), ARGV[i + 1], ARGV[i + 2])
  else
    local next = wf_deliver(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[2])
    if next then wf_settled(ARGV[i], next, ARGV[2]) end
  end
end
return {wf_handed.n}
