-- limit_repair.lua: end the permits of concurrency limits (flow.lua) whose
-- holder was lost. A permit is ended by its attempt's end or its lease's
-- expiry; a holder whose record is gone or no longer a running job of the
-- key (an eviction, a key deleted by hand) would otherwise hold it for
-- ever, and the key's parked jobs would never run. Likewise a promise (a
-- member scored 0) whose job is no longer due and unclaimed: an enqueue or
-- a wake-up drops such a promise only while nothing holds a permit, so on a
-- key some job always holds it would take one of the key's permits for
-- ever. Only the keys of the
-- limits hash are looked at: the keys that parked jobs, the only ones a
-- lost permit holds jobs back on (a key at its limit parks its next job,
-- and enters the hash). The key's parked jobs the freed permits admit are
-- woken (flow_wake, which also drops lost promises once nothing holds one).
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 HSCAN cursor of the limits hash ('0' to start)   3 HSCAN COUNT
-- Reply: {next cursor ('0' when the scan is complete), permits and promises ended}
queue_guard()
local res = redis.call('HSCAN', P .. 'limits', ARGV[2], 'COUNT', num(ARGV[3]))
local kv, fixed = res[2], 0
for i = 1, #kv, 2 do
  local key = kv[i]
  local hk = limit_holders(key)
  local lost = {}
  -- a holders key of another type (written by hand) holds no permit: an
  -- error here would keep the permits this call ended before it
  local members = redis.pcall('ZRANGE', hk, 0, -1, 'WITHSCORES')
  if members.err then members = {} end
  for j = 1, #members, 2 do
    local id = members[j]
    if members[j + 1] == '0' then -- a promise: its job due, unclaimed, waiting for nothing
      local h = jobread(jobkey(id), 'state', 'lkey', 'wait')
      if h[1] ~= 'pending' or h[2] ~= key or h[3] or not redis.call('ZSCORE', index['pending'], id) then
        lost[#lost + 1] = id
      end
    else
      local h = jobread(jobkey(id), 'state', 'lkey')
      if h[1] ~= 'running' or h[2] ~= key then lost[#lost + 1] = id end
    end
  end
  if lost[1] then
    if fixed == 0 then seq_bump() end
    fixed = fixed + #lost
    call_chunked('ZREM', hk, lost, 1000)
    if redis.call('EXISTS', limit_waiting(key)) == 1 then
      flow_wake(key)
    elseif redis.call('EXISTS', hk) == 0 then
      redis.call('HDEL', P .. 'limits', key)
    end
  end
end
if fixed > 0 then count('limits_repaired', fixed) end
return {res[1], fixed}
