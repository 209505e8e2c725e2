-- cancel.lua: an operator cancels a job. A pending (due or scheduled) job
-- becomes cancelled at once (final). A running job is marked: its next
-- renewal tells the pool to cancel the handler's context, and its outcome is
-- still committed by its token (a retry then becomes cancelled).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 actor ('operator:<name>')   4 note   5 retention ms
--      6 'wf' when the job's workflow is cancelled (workflow.Cancel), else ''
--      7 the state the operator saw the job in ('' for unchecked)
--      8 the token it saw the job hold ('' for any): the job must still hold
--        it (no attempt claimed since; missing reads as 0)
--      9 the run count it saw ('' for any): the job must still have it (no
--        operator re-ran it since; missing reads as 0)
--     10 for the cancel of a workflow never committed (AbandonUncommitted),
--        the note of its steps in this queue ('wf_part') the maintenance
--        leader read: a step whose note changed since (a re-submission
--        revived the workflow) is left alone ('' for unchecked)
-- A workflow step waiting for its dependencies is cancelled like a pending
-- job, and a cancelled step's dependents are cancelled in turn (workflow.lua).
-- A step whose workflow is cancelled is marked ('wf_cancel', whatever its
-- state) first: it is never promoted, resumed or re-run again, and a
-- verdict "not applied" about it (uncertain or in review) ends it cancelled
-- (resolve.lua, workflow.lua).
-- Reply: {1, 'cancelled', hand-over records written}; {2, 'running'} when the
--        running attempt was asked to stop; {3, state} when a step uncertain
--        or in review was marked (ARGV 6); {0, state} when the job cannot be
--        cancelled ('missing'); {-2, state, token, runs} when the job is no
--        longer in the state of ARGV 7, holds another token than ARGV 8 or
--        is on another run than ARGV 9 (nothing written); {-3, state} when
--        the note of ARGV 10 changed (nothing written).
local id, actor, note = ARGV[2], ARGV[3], ARGV[4]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'op', 'wf', 'lkey', 'lmax', 'wait', 'group', 'rkey', 'token', 'runs')
if not h[1] then return {0, 'missing'} end
if (ARGV[7] and ARGV[7] ~= '' and h[1] ~= ARGV[7]) or (ARGV[8] and ARGV[8] ~= '' and u64_norm(h[9]) ~= u64_norm(ARGV[8]))
  or (ARGV[9] and ARGV[9] ~= '' and cnt(h[10]) ~= cnt(ARGV[9])) then
  return {-2, h[1], u64_norm(h[9]), fmt(cnt(h[10]))}
end
queue_guard()
if ARGV[10] and ARGV[10] ~= '' and (not h[3] or redis.call('HGET', P .. 'wf_part', h[3]) ~= ARGV[10]) then
  return {-3, h[1]}
end
if ARGV[6] == 'wf' and h[3] then
  seq_bump()
  redis.call('HSET', k, 'wf_cancel', actor)
  if h[1] == 'uncertain' or h[1] == 'review' then
    -- its outcome is unknown: it stays to be reconciled, and ends cancelled
    -- unless it is found applied
    record(id, {event = 'cancel', from = h[1], actor = actor, note = note})
    event({type = 'cancel', job = id, actor = actor, note = note})
    return {3, h[1]}
  end
end
if h[1] == 'running' then
  seq_bump()
  -- the first request stands (it is the one that stops the attempt); a
  -- later one is recorded in the history only
  redis.call('HSETNX', k, 'cancel', actor)
  record(id, {event = 'cancel', from = 'running', actor = actor, note = note})
  event({type = 'cancel', job = id, actor = actor, note = note})
  return {2, 'running'}
end
if h[1] ~= 'pending' and h[1] ~= 'waiting' then return {0, h[1]} end
seq_bump()
if h[1] == 'waiting' then
  -- its dependency set stays (with its expiry), kept up to date, so a
  -- re-run waits for the dependencies that have not succeeded (workflow.lua)
  redis.call('ZREM', P .. 'waiting', id)
end
move(id, h[1], 'cancelled', now)
if h[4] then -- out of its limit's waiting jobs; a permit it was woken for goes to the next (flow.lua)
  if h[6] == 'limit' then redis.pcall('ZREM', limit_waiting(h[4]), id) end -- another type: holds no job
  flow_release(id, h[4])
end
-- out of its rate's deferrals: it holds no later start (flow.lua)
if h[6] == 'rate' and h[8] then flow_unhold(id, h[8]) end
if h[6] then redis.call('HDEL', k, 'wait', 'wait_at') end -- it waits for nothing now (a re-run is admitted anew)
if h[7] and h[1] == 'pending' then group_leave(id, h[7]) end -- its group's next job leads (group.lua)
redis.call('HSET', k, 'state', 'cancelled', 'reason', 'cancelled by ' .. actor, 'finished', fmt(now))
record(id, {event = 'cancel', from = h[1], actor = actor, note = note})
event({type = 'cancel', job = id, actor = actor, note = note})
finish(id, h[2], ARGV[5], true)
count('cancelled')
if h[1] == 'waiting' then wf_keep(id) end
if h[3] then
  wf_settled(id, 'cancelled', ARGV[5])
  return {1, 'cancelled', wf_handed.n}
end
return {1, 'cancelled', 0}
