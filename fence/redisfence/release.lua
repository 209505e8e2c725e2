-- release.lua: give up a claim (claim.lua) after the write was refused without applying anything.
-- The binding goes when no write of the operation is in flight or applied on its resource, so a
-- refused operation id stays free for a later write, on any resource.
-- KEYS[1] index, KEYS[2] claims   (see claim.lua)
-- ARGV[1] resource the claim was made for
-- Reply: 1 released (and the binding dropped if it was the last claim); 0 not bound to ARGV[1]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local n = redis.call('DECR', KEYS[2])
if n <= 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
end
return 1
