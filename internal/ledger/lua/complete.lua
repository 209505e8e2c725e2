-- complete.lua: apply a batch of attempt outcomes, each only if its token
-- still runs the job.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 retention ms for finished jobs, then 9 values per outcome:
--   id, token, outcome (succeeded | retry | dead | uncertain | defer | unknown_kind),
--   error text, delay ms (retry and defer: due at Redis TIME plus it), reason, fence token ('' when the
--   attempt's fence is its own token; else the resource lease's token), output (JSON the
--   attempt recorded, written only with a success; '' none), its redacted display ('' when the same)
--   or 3 values, id, token, 'ok': a success with none of the others (each argument
--   costs Redis about as much as a field read)
--   A retry whose attempts are used up becomes dead; a retry of a job an
--   operator asked to cancel becomes cancelled; a defer (resource busy) puts
--   the job back without consuming its attempt; unknown_kind (the pool knows no
--   worker for the kind) is a defer that also counts kind_defers and says why.
--   Every applied outcome releases the attempt's concurrency-limit permit.
-- Reply: {seq, seq raised, enqueued, history, then 1 value per outcome: the job's
--   state when it was applied (the job's token is the outcome's), else
--   {the job's state ('missing' when gone, 'corrupt' when no job's), its
--   current token ('0' when missing or not a token)}: the outcome is stale}. (Each reply value costs Redis about as
--   much as a field read.)
-- A job of a workflow (field 'wf') that ends hands its end to its dependents
-- (wf_settled in prelude.lua); a plain job does no more work for it.
--   seq, seq raised (1/0), enqueued, history: the write sequence (seq_bump in prelude.lua).
--   When workflow steps ended with dependents in other queues, one more value
--   follows: the number of hand-over records written (see workflow.lua).
local retention = ARGV[2]
-- output_fields: the job fields holding a success's output and its
-- redacted display (only when it differs).
local function output_fields(out, shown)
  if shown == '' then return {'output', out} end
  return {'output', out, 'output_shown', shown}
end
local call = redis.call
local reply, r = {0, 0, 0, ''}, 4
seq_bump()
local i, nargs = 3, #ARGV
while i <= nargs do
  local id, token, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local err, delay, reason, fence, out, shown = '', '0', '', '', '', ''
  if outcome == 'ok' then
    outcome = 'succeeded'
    i = i + 3
  else
    err, delay, reason, fence, out, shown = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8]
    i = i + 9
  end
  local k = P .. 'job:' .. id
  -- max_retries and cancel matter only to an outcome that may put the job
  -- back: other outcomes leave them unread (h[8], h[9] nil)
  local h
  if outcome == 'retry' or outcome == 'defer' or outcome == 'unknown_kind' then
    h = redis.pcall('HMGET', k, 'state', 'token', 'attempts', 'op', 'hist', 'wf', 'lkey', 'max_retries', 'cancel')
  else
    h = redis.pcall('HMGET', k, 'state', 'token', 'attempts', 'op', 'hist', 'wf', 'lkey')
  end
  if h.err then h = FOREIGN end -- jobread, inlined on this path
  local hist = h[5] ~= false
  -- an applied outcome ends the attempt's permit (flow.lua)
  if h[7] and h[1] == 'running' and h[2] == token then flow_release_later(id, h[7]) end
  if h[1] ~= 'running' or h[2] ~= token then
    tallied('fenced_commit')
    local cur = shown_token(h[2])
    event({type = 'fenced', stage = 'commit', job = id, token = token, current = cur})
    if h[1] then
      record(id, {event = 'fenced', stage = 'commit', token = token, outcome = outcome, error = err})
    end
    -- a record edited by hand cannot fail the batch's reply (shown_token)
    reply[r + 1] = {shown_state(h[1]), cur}
  elseif outcome == 'succeeded' and not hist and reason == '' and num(h[3]) <= 1 then
    -- the common path (one attempt, no reason to keep, no history): what
    -- the general path below writes for it, without its bookkeeping (a
    -- resource lease's token is kept in the record's 'fence')
    batch_move(id, 'running', 'succeeded', now)
    if fence == '' and out == '' then
      call('HSET', k, 'state', 'succeeded', 'finished', snow)
    else
      local f = {'state', 'succeeded', 'finished', snow}
      if fence ~= '' then f[#f + 1] = 'fence'; f[#f + 1] = fence end
      if out ~= '' then
        for _, v in ipairs(output_fields(out, shown)) do f[#f + 1] = v end
      end
      call('HSET', k, unpack(f))
    end
    finish(id, h[4], retention, false)
    tallied('succeeded')
    if h[6] then wf_settled(id, 'succeeded', retention) end
    reply[r + 1] = 'succeeded'
  else
    local due = now + num(delay)
    local attempt = cnt(h[3])
    local to, score = outcome, now
    local f = {}
    if fence ~= '' then f[#f + 1] = 'fence'; f[#f + 1] = fence end
    local putback = outcome == 'defer' or outcome == 'unknown_kind'
    if h[9] and (outcome == 'retry' or putback) then
      to = 'cancelled'
      reason = 'cancelled by ' .. h[9]
    elseif putback then
      to, score = 'pending', due
      f[#f + 1] = 'attempts'; f[#f + 1] = fmt(attempt - 1)
      if outcome == 'unknown_kind' then
        cnt_incr(k, 'kind_defers')
        tallied('deferred_unknown_kind')
      else
        tallied('deferred')
      end
    elseif outcome == 'retry' then
      if attempt > cnt(h[8]) then
        to = 'dead'
        if reason == '' then reason = 'retries exhausted' end
      else
        to, score = 'pending', due
      end
    end
    batch_move(id, 'running', to, score)
    f[#f + 1] = 'state'; f[#f + 1] = to
    if to == 'succeeded' and attempt <= 1 and reason == '' then
      -- the common path with a history list: nothing to clear (a success
      -- with a reason, an effect another job applied, keeps it)
      if hist then
        record(id, {event = 'end', attempt = attempt, token = token, fence = fence, outcome = to})
      end
    else
      if err ~= '' then f[#f + 1] = 'error'; f[#f + 1] = err end
      if reason ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = reason end
      if to == 'succeeded' then call('HDEL', k, 'error', 'reason') end
      if to ~= 'pending' or outcome ~= 'defer' then -- resource waits stay out of the history
        record(id, {event = 'end', attempt = attempt, token = token, fence = fence, outcome = to, error = err, reason = reason})
        hist = true
      end
    end
    if to == 'succeeded' and out ~= '' then
      for _, v in ipairs(output_fields(out, shown)) do f[#f + 1] = v end
    end
    if to == 'succeeded' or to == 'dead' or to == 'cancelled' then
      f[#f + 1] = 'finished'; f[#f + 1] = snow
      finish(id, h[4], retention, hist)
      tallied(to)
    elseif to == 'uncertain' then
      f[#f + 1] = 'uncertain_since'; f[#f + 1] = snow
      f[#f + 1] = 'reconcile_tries'; f[#f + 1] = '0'
      tallied('uncertain')
    elseif to == 'pending' and outcome == 'retry' then
      tallied('retried')
    end
    if to == 'pending' then wake() end
    call('HSET', k, unpack(f))
    if h[6] and (to == 'succeeded' or to == 'dead' or to == 'cancelled') then wf_settled(id, to, retention) end
    reply[r + 1] = to
  end
  r = r + 1
end
flow_release_flush()
flush_moves()
flush_tally()
reply[1], reply[2], reply[3], reply[4] = seq_reply()
if wf_handed.n > 0 then reply[#reply + 1] = wf_handed.n end
return reply
