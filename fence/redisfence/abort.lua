-- abort.lua: drop a Guard's pending effect record after its handler failed, so a retry can run.
-- KEYS[1] effect hash <ns>:fence:{<resource>}:op:<op id>   (see apply.lua)
-- ARGV[1] nonce of the pending record
-- Reply: 1 dropped; 0 not ours (expired, taken over, or already applied): left unchanged
local st = redis.call('HMGET', KEYS[1], 'state', 'nonce')
if st[1] == 'pending' and st[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
