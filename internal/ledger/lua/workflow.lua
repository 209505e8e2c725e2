-- workflow.lua: the workflow definitions shared by ledger scripts (prepended
-- after prelude.lua, each only to the scripts that name it: see link.go).
--
-- A step of a workflow is a job whose hash also holds 'wf' (the workflow id),
-- 'step' (its name), 'wf_home' (the queue holding the workflow record),
-- 'wf_next' (JSON list of its dependents, {q = queue, id = job id}) and, on a
-- step with dependencies, 'wf_allow' (JSON object: dependency name → true for
-- those allowed to fail) and 'wf_cause' (the dependency whose failure
-- cancelled it). A step that waits for dependencies is in state 'waiting',
-- indexed in P .. 'waiting' (score: creation time), never claimed; the names
-- of its dependencies not yet succeeded are the set P .. 'job:<id>:waits'.
-- A dependency's end reaches a dependent in the same queue inside the script
-- that ended it (wf_settled); in another queue (another slot) through a
-- hand-over record, P .. 'handover' (hash: '<queue>\n<job id>\n<step>' →
-- '<end> <write sequence>'), which the completer and the maintenance leader
-- deliver with handover.lua and remove with handover_ack.lua.
local function wf_waitk() return P .. 'waiting' end
local function wf_waitsk(id) return P .. 'job:' .. id .. ':waits' end
local wf_queue = string.match(P, '{(.*)}:$')
-- wf_handed counts the hand-over records this call wrote: the script's reply
-- carries it, so its caller moves them at once.
local wf_handed = {n = 0}

-- wf_failedk is the hash of a cancelled step's dependencies that failed
-- (name → end), kept with its dependency set until the step runs again.
local function wf_failedk(id) return P .. 'job:' .. id .. ':wf_failed' end

-- wf_keep gives a cancelled step's dependency set and failures its job's
-- expiry (retention), and wf_unkeep takes it back when the step waits again.
local function wf_keep(id)
  local ttl = redis.call('PTTL', jobkey(id))
  if ttl > 0 then
    redis.call('PEXPIRE', wf_waitsk(id), ttl)
    redis.call('PEXPIRE', wf_failedk(id), ttl)
  end
end
local function wf_unkeep(id)
  redis.call('PERSIST', wf_waitsk(id))
  redis.call('DEL', wf_failedk(id))
end

-- wf_deliver applies a dependency's end (from: its step name; what:
-- succeeded, dead, cancelled, reopen after an operator re-ran it, or lost
-- when its job record was found gone) to the
-- step id of this queue. Idempotent: a dependency name leaves the set once,
-- and only a waiting step is promoted or cancelled, so delivering twice does
-- nothing more. A cancelled step keeps its set (and the failed dependencies
-- in wf_failedk) up to date, so a re-run waits for what has not succeeded
-- yet. A cancelled step of a cancelled workflow ('wf_cancel') is never
-- resumed. Returns the step's new end ('cancelled' or 'reopen') when its
-- own dependents must hear of it, else nil.
local function wf_deliver(id, from, what, retention)
  local k = jobkey(id)
  local h = jobread(k, 'state', 'wf_allow', 'wf_cause', 'op', 'run_at', 'wf_cancel')
  if h == FOREIGN then return nil end -- no step: nothing to deliver to
  -- (cancel.lua marks a waiting step and cancels it in the same call)
  if h[6] and h[1] ~= 'waiting' then return nil end
  -- A step whose dependency sets hold another type (written by hand)
  -- goes to review before anything is written for it: an error on them
  -- would fail the completion delivering to it after its writes.
  if (h[1] == 'waiting' or h[1] == 'cancelled') and
      (foreign('set', {wf_waitsk(id)}) or foreign('hash', {wf_failedk(id)})) then
    redis.call('ZREM', wf_waitk(), id)
    quarantine(id, h[1], 'corrupt workflow key: holds another type')
    return nil
  end
  -- lost: the maintenance leader found the dependency's job record gone
  -- while the workflow ran (Ledger.SettleWorkflow). A dead end, for a step
  -- still waiting for it only: one that heard its end already (its name
  -- left the set) is left as it is.
  local why = what
  if what == 'lost' then
    if (h[1] ~= 'waiting' and h[1] ~= 'cancelled') or
        redis.call('SISMEMBER', wf_waitsk(id), from) == 0 then return nil end
    what, why = 'dead', 'lost: job record missing'
  end
  -- resume puts a step its dependency's failure cancelled back to waiting,
  -- or on to the next failed dependency when another one failed too
  local function resume()
    local other = redis.call('HKEYS', wf_failedk(id))[1]
    if other then
      local reason = 'dependency ' .. other .. ' ended ' .. redis.call('HGET', wf_failedk(id), other)
      redis.call('HSET', k, 'wf_cause', other, 'reason', reason)
      return false
    end
    redis.call('ZREM', index['cancelled'], id)
    redis.call('ZADD', wf_waitk(), snow, id)
    redis.call('HSET', k, 'state', 'waiting')
    redis.call('HDEL', k, 'finished', 'reason', 'wf_cause')
    wf_unkeep(id)
    unfinish(id, h[4])
    record(id, {event = 'resumed', reason = 'dependency ' .. from .. ' re-run'})
    return true
  end
  local promote = function()
    redis.call('ZREM', wf_waitk(), id)
    -- due now, or at the step's own Delay or RunAt if that is later
    local due = snow
    if h[5] and num(h[5]) > now then due = h[5] end
    redis.call('ZADD', index['pending'], due, id)
    redis.call('HSET', k, 'state', 'pending')
    redis.call('HINCRBY', statsk, 'promoted', 1)
    wake()
  end
  if what == 'reopen' then
    if h[1] == 'waiting' then
      redis.call('SADD', wf_waitsk(id), from)
    elseif h[1] == 'cancelled' and redis.call('HDEL', wf_failedk(id), from) == 1 then
      redis.call('SADD', wf_waitsk(id), from)
      if h[3] == from and resume() then return 'reopen' end
    elseif h[1] == 'cancelled' and h[3] == from then -- cancelled before wf_failedk existed
      redis.call('SADD', wf_waitsk(id), from)
      if resume() then return 'reopen' end
    end
    return nil
  end
  if h[1] ~= 'waiting' and h[1] ~= 'cancelled' then return nil end
  local allowed = false
  if what ~= 'succeeded' and h[2] then
    local ok, a = pcall(cjson.decode, h[2])
    allowed = ok and type(a) == 'table' and a[from] == true
  end
  if h[1] == 'cancelled' then
    if what == 'succeeded' and redis.call('HDEL', wf_failedk(id), from) == 1 then
      -- a failed dependency re-run and succeeded before its reopen reached
      -- this step (the newer end replaced the hand-over record): both at once
      redis.call('SREM', wf_waitsk(id), from)
      if h[3] == from and resume() then
        if redis.call('SCARD', wf_waitsk(id)) == 0 then promote() end
        return 'reopen'
      end
      return nil
    end
    -- cancelled while it waited: keep what a re-run would wait for
    if redis.call('EXISTS', wf_waitsk(id)) == 0 then return nil end
    if what == 'succeeded' or allowed then
      redis.call('SREM', wf_waitsk(id), from)
    else
      redis.call('HSET', wf_failedk(id), from, what)
      wf_keep(id)
    end
    return nil
  end
  if what == 'succeeded' or allowed then
    redis.call('SREM', wf_waitsk(id), from)
    if redis.call('SCARD', wf_waitsk(id)) == 0 then promote() end
    return nil
  end
  local reason = 'dependency ' .. from .. ' ended ' .. what
  if why ~= what then reason = 'dependency ' .. from .. ' ' .. why end
  redis.call('ZREM', wf_waitk(), id)
  redis.call('ZADD', index['cancelled'], snow, id)
  redis.call('HSET', wf_failedk(id), from, what)
  redis.call('HSET', k, 'state', 'cancelled', 'reason', reason, 'wf_cause', from, 'finished', snow)
  record(id, {event = 'cancelled', reason = reason})
  finish(id, h[4], retention, true)
  wf_keep(id)
  count('cancelled')
  return 'cancelled'
end

-- wf_end records the end of step name of workflow wf (home queue: this
-- one) on the workflow's record, 'end:<step>' (reopen: removes it), so the
-- end outlives the step's job record, which expires a retention after it
-- ended whether or not the maintenance leader read the workflow meanwhile.
-- A record gone (pruned) or of another type (written by hand) is left as
-- it is.
local function wf_end(wf, name, what)
  local wk = P .. 'wf:' .. wf
  if redis.call('EXISTS', wk) == 0 or foreign('hash', {wk}) then return end
  if what == 'reopen' then
    redis.call('HDEL', wk, 'end:' .. name)
  else
    redis.call('HSET', wk, 'end:' .. name, what)
  end
end

-- wf_end_to hands the end of step name of workflow wf to its record in
-- queue home: at once in this queue, else through a hand-over record whose
-- job id is WF_END .. wf (no step's id starts with '@'), which handover.lua
-- delivers with wf_end.
local WF_END = '@wf:'
local function wf_end_to(home, wf, name, what)
  if home == wf_queue then return wf_end(wf, name, what) end
  seq_bump()
  wf_handed.n = wf_handed.n + 1
  redis.call('HSET', P .. 'handover', home .. '\n' .. WF_END .. wf .. '\n' .. name, what .. ' ' .. fmt(seq_now))
end

-- wf_settled hands the end of step id of this queue (succeeded, dead,
-- cancelled, or reopen) to its workflow's record (wf_end_to) and to its
-- dependents: in this queue at once (and on to theirs when that cancels
-- or reopens them), in another queue through a hand-over record. Called
-- only for jobs whose hash has 'wf'. Each step it ends or reopens notes its
-- workflow in P .. 'wf_changed' (set of '<home queue>\n<workflow id>').
local function wf_settled(id, what, retention)
  local work = {{id, what}}
  while #work > 0 do
    local it = table.remove(work)
    local x = jobread(jobkey(it[1]), 'step', 'wf_next', 'wf', 'wf_home')
    -- the workflow may have changed state: the maintenance leader's next
    -- pass reads it (Ledger.ChangedWorkflows), not every open workflow
    if x[3] and x[4] then
      redis.call('SADD', P .. 'wf_changed', x[4] .. '\n' .. x[3])
      if x[1] then wf_end_to(x[4], x[3], x[1], it[2]) end
    end
    if x[1] and x[2] then
      local ok, deps = pcall(cjson.decode, x[2])
      if ok and type(deps) == 'table' then
        for _, d in ipairs(deps) do
          if d.q == wf_queue then
            local next = wf_deliver(d.id, x[1], it[2], retention)
            if next then work[#work + 1] = {d.id, next} end
          else
            seq_bump()
            wf_handed.n = wf_handed.n + 1
            redis.call('HSET', P .. 'handover', d.q .. '\n' .. d.id .. '\n' .. x[1], it[2] .. ' ' .. fmt(seq_now))
          end
        end
      end
    end
  end
end
