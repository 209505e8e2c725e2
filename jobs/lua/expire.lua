-- expire.lua: the reconciler moves a running job whose lease deadline passed
-- without a commit to uncertain.
-- KEYS: the ledger layout (see prelude.lua).
-- ARGV 1 job id   2 reconciler leader token
-- Reply: 1 moved; 0 not expired (renewed or committed meanwhile); -1 stale reconciler.
local h = redis.call('HMGET', jobk, 'state', 'deadline', 'token', 'attempts')
if not reconciler_ok(ARGV[2]) then return -1 end
if h[1] ~= 'running' then
  redis.call('ZREM', index['running'], ARGV[1])
  return 0
end
if tonumber(h[2]) > now then return 0 end
local reason = 'lease expired without commit'
move(ARGV[1], 'running', 'uncertain', now)
redis.call('HSET', jobk, 'state', 'uncertain', 'updated', fmt(now), 'reason', reason,
  'uncertain_since', fmt(now), 'reconcile_tries', '0')
record({event = 'end', attempt = tonumber(h[4]), token = h[3], outcome = 'uncertain', reason = reason})
count('uncertain')
return 1
