-- abort.lua: drop a Guard's pending effect record after its handler failed, so a retry can run.
-- KEYS[1] effect hash <ns>:fence:{<resource>}:op:<op id>   (see apply.lua)
-- ARGV[1] nonce of the pending record
-- Reply: 1 dropped; 0 not ours (expired, taken over, already applied, or not a hash): left unchanged
local st = redis.pcall('HMGET', KEYS[1], 'state', 'nonce')
if st.err then return 0 end
if st[1] == 'pending' and st[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
