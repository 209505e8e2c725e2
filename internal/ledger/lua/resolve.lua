-- resolve.lua: a reconciler decision or an operator's resolution.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 job id   3 allowed starting states, comma separated (e.g. 'uncertain,review')
--      4 decision: succeeded | rerun | dead | review | later
--      5 actor ('reconciler:<pool>', 'bridge:<worker>' or 'operator:<name>')
--      6 evidence or note
--      7 reconciler leader token ('' for an operator)   8 retention ms
--      9 next look in ms (for later: Redis TIME plus it)
--     10 the token the decision was made on ('' for none): the job must
--        still hold it (no attempt claimed since; missing reads as 0)
--     11 the run count the decision was made on ('' for none): the job must
--        still have it (no operator re-ran it since; missing reads as 0)
--     12 for a rerun, the retry delay in ms when the decision is a
--        reconciler's verdict "not applied" ('' or absent: an explicit
--        re-run, an operator's). The verdict makes the attempt a failed one:
--        a job with attempts left is retried, due at Redis TIME plus the
--        delay, on the same run; one whose attempts are spent goes dead, as
--        a failed attempt's retry does (complete.lua). A job an operator
--        asked to cancel, and a step of a cancelled workflow, end cancelled
--        as below whatever the delay.
-- A workflow step's end (or an operator's re-run of a failed step, which
-- reopens the dependents its failure cancelled) reaches its dependents
-- (workflow.lua).
-- A step of a cancelled workflow ('wf_cancel', cancel.lua) never runs
-- again: a rerun of it uncertain or in review (the verdict "not applied",
-- the reconciler's or an operator's) ends it cancelled, and a rerun of it
-- dead or cancelled is refused.
-- KEYS 3 the queue's unique index ns:{q}:unique (see enqueue_unique.lua): a
--   unique job re-run to pending holds its key again, unless another job
--   holds it by then.
-- Reply: {1, new state, hand-over records written}; {0, state} when the job is not in an allowed state
--        ('missing' when there is no such job); {-1, state} when the
--        reconciler's token is stale; {-2, state, token} when the job no
--        longer holds the token of ARGV 10 (token: the one it holds);
--        {-3, state, workflow id, who cancelled it} when a rerun of a
--        cancelled workflow's finished step is refused; {-4, state, runs}
--        when the job is on another run than ARGV 11.
-- Every operator re-run (to pending or, for a workflow step, to waiting)
-- adds one to the job's 'runs': a job cancelled and re-run since a decision
-- was seen is back in its state with its token, but not on its run.
-- A re-run also clears 'kind_defers': the new run gets a fresh allowance of
-- put-backs by pools without the kind (one that went dead as "unknown
-- kind" is not killed again at its first claim).
local id, decision = ARGV[2], ARGV[4]
local k = jobkey(id)
local h = redis.call('HMGET', k, 'state', 'op', 'cancel', 'wf', 'wf_cause', 'token', 'wf_cancel', 'runs', 'ukey',
  'attempts', 'max_retries')
local state = h[1]
if not state then return {0, 'missing'} end
local allowed = false
for s in string.gmatch(ARGV[3], '[^,]+') do
  if s == state then allowed = true end
end
if not allowed then return {0, state} end
-- (compared as readers parse them: a token field that is no number reads as 0)
if ARGV[10] and ARGV[10] ~= '' and u64_norm(h[6]) ~= u64_norm(ARGV[10]) then return {-2, state, u64_norm(h[6])} end
if ARGV[11] and ARGV[11] ~= '' and cnt(h[8]) ~= cnt(ARGV[11]) then return {-4, state, fmt(cnt(h[8]))} end
if not reconciler_ok(ARGV[7]) then return {-1, state} end
if decision ~= 'succeeded' and decision ~= 'rerun' and decision ~= 'dead' and decision ~= 'review' and decision ~= 'later' then
  return redis.error_reply('unknown decision ' .. decision)
end
-- unique_retake makes the re-run job the holder of its unique key ukey when
-- no other job holds it (in one of that job's unique states, with that key):
-- the pruner may have dropped the entry while this job was out of its
-- states, and a later enqueue of the key is a duplicate of this one. A key
-- another job took meanwhile stays that job's. An index of another type
-- (written by hand) is left alone.
local function unique_retake(ukey)
  local uniqk = KEYS[3]
  local cur = redis.pcall('HGET', uniqk, ukey)
  if cur == id or type(cur) == 'table' then return end
  if cur then
    local c = jobread(jobkey(cur), 'state', 'ustates', 'ukey')
    if c[1] and c[2] and c[3] == ukey then
      for s in string.gmatch(c[2], '[^,]+') do
        if s == c[1] then return end
      end
    end
  end
  redis.call('HSET', uniqk, ukey, id)
end

local unknown = state == 'uncertain' or state == 'review'
if decision == 'rerun' and h[7] and not unknown then return {-3, state, h[4], h[7]} end
queue_guard()
-- a step re-run waits again in its dependency set: one of another type
-- (written by hand) fails the call before its first write
if decision == 'rerun' and h[4] and foreign('set', {wf_waitsk(id)}) then
  return redis.error_reply('FOREIGNKEY the dependency set of step ' .. id .. ' holds another type: nothing was written')
end
seq_bump()
-- which way a re-run goes, read before the history entry names it
local cancels = decision == 'rerun' and ((h[3] and string.sub(ARGV[5], 1, 9) ~= 'operator:') or h[7])
local waits = decision == 'rerun' and not cancels and h[4] and (h[5] or redis.call('EXISTS', wf_waitsk(id)) == 1)
local not_applied = decision == 'rerun' and not cancels and not waits and ARGV[12] and ARGV[12] ~= ''
local spent = not_applied and cnt(h[10]) > cnt(h[11])
-- what the decision did when it is not what it says: a re-run that ended
-- cancelled or waits for its dependencies, or a reconciler's "not applied"
-- (a failed attempt) that was retried or went dead with its attempts spent
local outcome = nil
if cancels then outcome = 'cancelled'
elseif waits then outcome = 'waiting'
elseif spent then outcome = 'dead'
elseif not_applied then outcome = 'retry' end
-- recorded first, so a final state's retention covers the history too
record(id, {event = 'resolve', from = state, decision = decision, outcome = outcome, actor = ARGV[5], note = ARGV[6]})
-- an operator's decision is in the event feed too (a reconciler's is not:
-- it decides many jobs, each in its history)
if string.sub(ARGV[5], 1, 9) == 'operator:' then
  event({type = 'resolve', job = id, decision = decision, actor = ARGV[5], note = ARGV[6]})
end
local to = decision
if decision == 'later' then
  to = state
  cnt_incr(k, 'reconcile_tries')
  redis.call('ZADD', index[state], fmt(now + num(ARGV[9])), id)
elseif cancels then
  -- an operator asked to cancel the job (or its workflow) before its
  -- outcome was known, and a reconciler (the maintenance leader's, or the
  -- asynq bridge's, which has no leader token; or, for a workflow's step,
  -- an operator) found it not applied: it ends cancelled, not re-run
  to = 'cancelled'
  move(id, state, 'cancelled', now)
  redis.call('HSET', k, 'reason', 'cancelled by ' .. (h[7] or h[3]) .. '; not applied: ' .. ARGV[6], 'state', 'cancelled', 'finished', fmt(now))
  finish(id, h[2], ARGV[8], true)
  count('cancelled')
elseif waits then
  -- a workflow step cancelled while it waited (its dependency's failure
  -- cancelled it, or an operator) waits again for the dependencies that
  -- have not succeeded (an operator re-running them, or the step, resumes it)
  to = 'waiting'
  cnt_incr(k, 'runs')
  redis.call('HSET', k, 'state', 'waiting')
  redis.call('HDEL', k, 'finished', 'cancel', 'reason', 'error', 'wf_cause', 'kind_defers')
  if h[5] then redis.call('SADD', wf_waitsk(id), h[5]) end
  wf_unkeep(id)
  unfinish(id, h[2])
  redis.call('ZREM', index[state], id)
  redis.call('ZADD', P .. 'waiting', snow, id)
elseif spent then
  -- the reconciler found the job's last allowed attempt not applied: its
  -- attempts are spent, as a failed attempt's would be
  to = 'dead'
  move(id, state, 'dead', now)
  redis.call('HSET', k, 'reason', 'retries exhausted: its last attempt (' .. fmt(cnt(h[10])) .. ') was found not applied: ' .. ARGV[6],
    'state', 'dead', 'finished', fmt(now))
  finish(id, h[2], ARGV[8], true)
  count('dead')
elseif not_applied then
  -- the reconciler found the attempt not applied: a retry on the same run
  -- (its error kept, as a failed attempt's), due after the pool's delay
  local due = now + num(ARGV[12])
  to = 'pending'
  redis.call('HSET', k, 'state', 'pending', 'run_at', fmt(due))
  redis.call('HDEL', k, 'finished', 'reason')
  move(id, state, 'pending', due)
  if h[9] then unique_retake(h[9]) end
  count('retried')
  wake()
elseif decision == 'rerun' then
  to = 'pending'
  cnt_incr(k, 'runs')
  redis.call('HSET', k, 'state', 'pending', 'run_at', fmt(now))
  redis.call('HDEL', k, 'finished', 'cancel', 'reason', 'error', 'kind_defers')
  unfinish(id, h[2])
  move(id, state, 'pending', now)
  if h[9] then unique_retake(h[9]) end
  wake()
elseif decision == 'succeeded' or decision == 'dead' then
  move(id, state, to, now)
  redis.call('HSET', k, 'reason', ARGV[6], 'state', to, 'finished', fmt(now))
  finish(id, h[2], ARGV[8], true)
  count(to)
elseif decision == 'review' then
  move(id, state, 'review', now)
  redis.call('HSET', k, 'reason', ARGV[6], 'state', 'review')
end
count('resolved_' .. decision)
if h[4] then
  if to == 'succeeded' or to == 'dead' or to == 'cancelled' then
    wf_settled(id, to, ARGV[8])
  elseif (to == 'pending' or to == 'waiting') and (state == 'dead' or state == 'cancelled') then
    wf_settled(id, 'reopen', ARGV[8])
  end
end
return {1, to, wf_handed.n}
