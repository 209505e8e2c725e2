-- finish.lua: turn a Guard's pending effect record into an applied one after its handler succeeded.
-- KEYS[1] effect hash <ns>:fence:{<resource>}:op:<op id>   (see apply.lua)
-- ARGV[1] nonce of the pending record
-- ARGV[2] token    ARGV[3] owner    ARGV[4] resource    ARGV[5] operation id
-- ARGV[6] retention in ms (0: keep forever)
-- Reply: 1 recorded (our pending record, or none left because it expired)
--        0 someone else recorded the operation as applied meanwhile (left unchanged)
--        error 'FENCEDQ <reason>'   KEYS[1] holds another type than a hash (edited by hand): left unchanged
-- The handler's effect has happened, so it is recorded even if the pending record expired.
local st = redis.pcall('HMGET', KEYS[1], 'state', 'nonce')
if st.err then return redis.error_reply('FENCEDQ store key ' .. KEYS[1] .. ' is not a hash') end
if st[1] == 'applied' then
  return 0
end
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'applied', 'resource', ARGV[4], 'operation_id', ARGV[5],
  'token', ARGV[2], 'owner', ARGV[3], 'applied_us', now)
local ttl = tonumber(ARGV[6])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
