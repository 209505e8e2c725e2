-- flow.lua: concurrency limits and rate limits (jobs.Limiter, jobs.RateLimiter),
-- shared by the scripts that admit, park, release and wake jobs. Linked like
-- prelude.lua (only the definitions a script names), so a script that names
-- none of them, and a job without flow control, pays nothing.
--
-- A job under flow control carries the field 'flow', read by the claim in the
-- same HMGET as its other optional fields: 'L<lmax>:<lkey>' for a job with a
-- concurrency limit only and 'R<rmax>/<rper>:<rkey>' for one with a rate limit
-- only, neither held back before (the claim needs no other read), else '1' (the
-- claim reads the fields below); parking or deferring a job sets it to '1'.
-- And:
--   lkey, lmax        its concurrency limit: at most lmax running attempts hold a
--                     permit of key lkey at once
--   rkey, rmax, rper  its rate limit: at most rmax starts per rper ms
--   wait, wait_at     while held back: 'limit' (parked), or 'rate' and the start
--                     time it was deferred to (ms)
-- Keys, derived from the queue's prefix so they share its hash slot:
--   P..'limit:'..key..':holders'  zset: job id -> when its permit was taken (ms);
--                                 and, scored 0, the promises: job ids put in the
--                                 due index by an enqueue or a wake-up and not yet
--                                 claimed (so an enqueue parks a job at once when
--                                 permits and promises fill the limit)
--   P..'limit:'..key..':wait'     zset: parked job id -> its creation time (FIFO)
--   P..'limits'                   hash: key -> max, for keys that had parked jobs
--                                 and still have holders, promises or waiters:
--                                 entered when a job parks, dropped when a
--                                 release leaves the key none (a key that never
--                                 parked a job is not in it); Limits and Counts
--                                 (flowread.go, read.go) prune entries left by
--                                 earlier versions, which kept them for ever
--   P..'rate:'..key               zset: '<job id>:<µs>' -> start time (ms), the
--                                 starts of the last period (the longest period
--                                 of the jobs that started under the key: a job
--                                 counts the starts of its own)
--   P..'rate-per:'..key           string: that longest period (ms), expiring a
--                                 period (and RATE_KEEP_MS) after the last start
--                                 made with it, on the namespace's time, so a
--                                 job of a shorter period (another kind, or one
--                                 enqueued before the rate was changed) never
--                                 drops the starts a longer one counts
--   P..'rate-held:'..key          zset: deferred job id -> its deferred start (ms)
--   P..'rates'                    hash: key -> '<max>/<per ms>', for keys with deferred jobs
--                                 (the rate zsets expire a period and RATE_KEEP_MS
--                                 after their last entry, on the namespace's time)
-- Every family has its own prefix, none a prefix of another's followed by a
-- key ('limit:' and 'limits', 'rate:', 'rate-held:', 'rate-per:' and 'rates'), and the two
-- limit zsets of a key differ in their suffix, so no two keys' zsets share a
-- Redis key whatever the key strings. (Earlier versions kept a rate's deferrals
-- at P..'rate:'..key..':held', the starts zset of rate key key..':held'; such
-- a zset is no longer read as deferrals and expires by itself a period after
-- its last deferral: jobs deferred before an upgrade keep their due time and
-- are admitted as usual, and until they start the deferrals made after it
-- (and Limits' Deferred) count only the deferrals made since.)
--
-- A grouped job (group.lua) that enters its group's own index at its enqueue
-- is neither promised a permit nor parked: it is not due, and the claim
-- admits it (flow_admit) once it is its group's head.
-- A permit is held by a running attempt: its token is the attempt's token, so
-- a holder whose permit was reclaimed (its lease expired, see expire.lua) can
-- neither renew nor complete, and storage fenced by the token refuses it once
-- the job runs again.

-- What a claim admits is counted per key and written once per key and call
-- (flow_flush, at the end of the claim, and before a deferral reads a rate
-- window): per rate zset, the count of each period's window met (read once,
-- rate_n[rk][per]), the longest period kept (rate_keep: the stored one, read
-- once, or a longer one of this call's jobs), the starts not yet written and
-- the longest period they were made with (rate_per); per holders zset, the
-- permits held (read once) and the permits taken not yet written. All of a
-- call's starts share its now.
local rate_n, rate_add, rate_per, rate_keep = {}, {}, {}, {}
local limit_n, limit_add = {}, {}
-- per limit key, whether jobs wait on it, looked at once per call by the
-- releases of a completion or an expiry (which park nothing)
local limit_waits = {}
-- per limit key, the permits a completion ended while nothing waited on the
-- key, removed from its holders zset with one ZREM (flow_release_flush)
local limit_rem = {}
-- per limit key not looked at yet, the job ids whose permits a completion
-- ended (limit_later), in the order met (limit_later_keys):
-- flow_release_flush looks whether jobs wait on any of them with one EXISTS
local limit_later, limit_later_keys = {}, {}
-- the last flow field flow_parse read this call (false: none) and what it
-- says (fp_hk: the limit's holders zset; fp_nmax and fp_nper: the max and
-- the period as numbers)
local fp_flow, fp_lkey, fp_lmax, fp_hk, fp_rkey, fp_rmax, fp_rper = false, nil, nil, nil, nil, nil, nil
local fp_nmax, fp_nper = nil, nil
-- the suffix of a rate start's member (':' and the call's µs), once per call
local rate_suffix = false
-- the jobs flow_enqueue promised a permit this call (an enqueue script adds
-- them to the due index only as it returns)
local limit_promised = {}
-- the jobs flow_enqueue parked this call (an enqueue script's reply says so,
-- for the client's fencedq_limit_waits_total)
local limit_parked = {}

-- RATE_KEEP_MS: how long past its period a rate's starts (its longest
-- period kept, its deferrals) are kept. Windows are counted on the
-- namespace's time, so these keys expire at a moment of that time
-- (PEXPIREAT, as finish does), not a TTL on the node's clock: a TTL set on
-- a primary whose clock is behind (a positive offset, internal/epoch) ends
-- that much earlier on the node promoted next, which resumes the
-- namespace's time from the last time written, and would forget starts its
-- window still counts (a new window at once after every such failover).
-- The margin covers a node's clock ahead of the namespace's time: at most
-- CATCH_UP_MAX_US (60 s) while a new tenure catches up.
local RATE_KEEP_MS = 60000

-- zadd_all adds the score-member pairs of adds to zset k.
local function zadd_all(k, adds)
  for i = 1, #adds, 1000 do
    redis.call('ZADD', k, unpack(adds, i, math.min(i + 999, #adds)))
  end
end

-- flow_flush writes the permits taken and the starts admitted that are not
-- yet written: a rate zset's own when rk is given, else all, each rate zset
-- then expiring the longest period kept after its starts (a start of a
-- shorter period never shortens it).
local function flow_flush(rk)
  for k, adds in pairs(rate_add) do
    if rk == nil or k == rk then
      zadd_all(k, adds)
      local per, keep = rate_per[k], rate_keep[k]
      local at = now + per + RATE_KEEP_MS
      if per >= keep.stored then
        redis.call('SET', keep.key, per, 'PXAT', at)
        keep.stored = per
        redis.call('PEXPIREAT', k, at)
      elseif redis.call('PEXPIRETIME', k) < at then -- else it expires with the longer period's starts
        redis.call('PEXPIREAT', k, at)
      end
      rate_add[k] = nil
    end
  end
  if rk then return end
  for k, adds in pairs(limit_add) do
    zadd_all(k, adds)
    limit_add[k] = nil
  end
end

-- flow_fields appends to extra (a job's extra fields for write_new_job) the
-- flow fields of the five flow values at ARGV[a] (limit key, limit max, rate
-- key, rate max, rate period ms; '' keys: none).
local function flow_fields(extra, a)
  local lkey, rkey = ARGV[a], ARGV[a + 2]
  if rkey ~= '' and lkey ~= '' then
    extra[#extra + 1] = 'flow'; extra[#extra + 1] = '1'
  elseif rkey ~= '' then
    extra[#extra + 1] = 'flow'; extra[#extra + 1] = 'R' .. ARGV[a + 3] .. '/' .. ARGV[a + 4] .. ':' .. rkey
  elseif lkey ~= '' then
    extra[#extra + 1] = 'flow'; extra[#extra + 1] = 'L' .. ARGV[a + 1] .. ':' .. lkey
  end
  if lkey ~= '' then
    extra[#extra + 1] = 'lkey'; extra[#extra + 1] = lkey
    extra[#extra + 1] = 'lmax'; extra[#extra + 1] = ARGV[a + 1]
  end
  if rkey ~= '' then
    extra[#extra + 1] = 'rkey'; extra[#extra + 1] = rkey
    extra[#extra + 1] = 'rmax'; extra[#extra + 1] = ARGV[a + 3]
    extra[#extra + 1] = 'rper'; extra[#extra + 1] = ARGV[a + 4]
  end
end

-- flow_name is the limit's name (metric labels): its key up to the first
-- ':', '' for a key without one (as a whole it may be user data).
local function flow_name(key) return string.match(key, '^([^:]*):') or '' end

local function limit_holders(key) return P .. 'limit:' .. key .. ':holders' end
local function limit_waiting(key) return P .. 'limit:' .. key .. ':wait' end
local function rate_held(key) return P .. 'rate-held:' .. key end

-- rate_window returns how many starts rate zset rk (of rate key key) holds
-- in the last per ms. Its first look in a call drops the starts older than
-- the longest period kept (stored at P..'rate-per:'..key, or per when
-- longer); each period is counted once per call, with the call's starts
-- admitted before that look, and later ones added as they are admitted.
local function rate_window(rk, key, per)
  local keep = rate_keep[rk]
  if not keep then
    keep = {key = P .. 'rate-per:' .. key}
    keep.stored = num(redis.call('GET', keep.key) or 0)
    keep.per = math.max(keep.stored, per)
    rate_keep[rk] = keep
    rate_n[rk] = {}
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', now - keep.per) -- the window is (now - per, now]
  end
  local n = rate_n[rk][per]
  if not n then
    if per >= keep.per then
      n = redis.call('ZCARD', rk)
    else
      n = redis.call('ZCOUNT', rk, '(' .. fmt(now - per), '+inf')
    end
    -- the call's starts not yet written (at now: in every period's window)
    local adds = rate_add[rk]
    if adds then n = n + #adds / 2 end
    rate_n[rk][per] = n
  end
  return n
end

-- flow_park parks pending job id (not in the due index) on limit key; false
-- when the key's waiting zset holds another type: nothing is written.
local function flow_park(id, key, max, created)
  local r = redis.pcall('ZADD', limit_waiting(key), created, id)
  if type(r) == 'table' then return false end
  redis.call('HSET', jobkey(id), 'wait', 'limit', 'flow', '1')
  redis.call('HSET', P .. 'limits', key, max)
  return true
end

-- flow_drop_lost drops from holders zset hk the promises to jobs no longer
-- due and unclaimed (a record lost, or a grouped job promised by an earlier
-- version while in its group's own index). Called only when nothing holds a
-- permit of the key: no release will come, so such a promise would keep the
-- key's parked jobs, and its next ones, parked for ever.
local function flow_drop_lost(hk)
  for _, rid in ipairs(redis.call('ZRANGEBYSCORE', hk, 0, 0)) do
    local h = jobread(jobkey(rid), 'state', 'wait')
    if h[1] ~= 'pending' or h[2] or
        not (limit_promised[rid] or redis.call('ZSCORE', index['pending'], rid)) then
      redis.call('ZREM', hk, rid)
    end
  end
end

-- flow_wake moves parked jobs of limit key back to the due index, oldest
-- first (at their creation time, so ahead of later jobs), each promised a
-- permit, while the claim would admit them: the permits held and promised
-- stay below the woken job's own max (the max in force is the admitted
-- job's), so a release after the limit was lowered wakes only the jobs the
-- new limit admits, never jobs a claim would park again. It stops at the
-- first job that does not fit (FIFO), and once the permits reach the last
-- woken job's max (a job behind it with a higher max is woken by the next
-- release: a promise or a holder remains to release). When the oldest does
-- not fit and nothing holds a permit, promises to jobs no longer due are
-- dropped first (flow_drop_lost), so a lost promise never leaves a job
-- parked. It drops the key's entry in the limits hash when nothing holds or
-- waits on it, and returns how many it woke.
local function flow_wake(key)
  local wk, hk = limit_waiting(key), limit_holders(key)
  local taken, woken, swept, fit = redis.pcall('ZCARD', hk), 0, false, nil
  if type(taken) == 'table' then return 0 end -- holders of another type (foreign release)
  while not fit or taken < fit do
    local e = redis.pcall('ZPOPMIN', wk)
    if e.err or not e[1] then break end -- none left, or waiting of another type
    local h = jobread(jobkey(e[1]), 'state', 'wait', 'lmax')
    if h[1] == 'pending' and h[2] == 'limit' then -- else cancelled or gone: skip it
      fit = num(h[3])
      if taken >= fit and not swept and redis.call('ZCOUNT', hk, '(0', '+inf') == 0 then
        flow_drop_lost(hk)
        swept, taken = true, redis.call('ZCARD', hk)
      end
      if taken >= fit then
        redis.call('ZADD', wk, e[2], e[1]) -- not admitted yet: it keeps its place
        break
      end
      redis.call('HDEL', jobkey(e[1]), 'wait')
      redis.call('ZADD', index['pending'], e[2], e[1])
      redis.call('ZADD', hk, 0, e[1]) -- promised
      taken, woken = taken + 1, woken + 1
    end
  end
  if woken > 0 then
    wake() -- and the key has a promise, so it stays in the limits hash
  elseif redis.call('EXISTS', wk) == 0 and redis.call('EXISTS', hk) == 0 then
    redis.call('HDEL', P .. 'limits', key)
  end
  return woken
end

-- flow_wake_freed wakes the jobs parked on limit key lkey (holders zset
-- hk) once a promise was given up outside a release (a claim deferring the
-- promised job by its rate): no release would come for them. The permits
-- this call took are written first, so the wake counts them.
local function flow_wake_freed(lkey, hk)
  if redis.call('EXISTS', limit_waiting(lkey)) == 1 then
    local adds = limit_add[hk]
    if adds then
      zadd_all(hk, adds)
      limit_add[hk] = nil
    end
    flow_wake(lkey)
  end
end

-- flow_parse reads flow field flow of a limit only ('L<max>:<key>') or a
-- rate only ('R<max>/<per>:<key>') into the fp_ values and reports whether it
-- was one (else the job's flow fields are read). Jobs sharing a key, claimed
-- one after another, parse it once.
local function flow_parse(flow)
  if flow ~= fp_flow then
    fp_flow, fp_lkey, fp_lmax, fp_hk, fp_rkey, fp_rmax, fp_rper = flow, nil, nil, nil, nil, nil, nil
    local m, key = string.match(flow, '^L(%d+):(.*)$')
    if m then
      fp_lkey, fp_lmax, fp_hk, fp_nmax = key, m, limit_holders(key), num(m)
    else
      fp_rmax, fp_rper, fp_rkey = string.match(flow, '^R(%d+)/(%d+):(.*)$')
      fp_nmax, fp_nper = num(fp_rmax), num(fp_rper)
    end
  end
  return fp_lkey ~= nil or fp_rkey ~= nil
end

-- flow_waits reports whether jobs are parked on limit key; a key found with
-- none is remembered for the call (a release parks nothing).
local function flow_waits(key)
  local waits = limit_waits[key]
  if waits == nil then
    waits = redis.call('EXISTS', limit_waiting(key)) == 1
    if not waits then limit_waits[key] = false end
  end
  return waits
end

-- A release (a completion, an expiry, a cancel) reads and writes a limit's
-- keys with redis.pcall where it first touches them (marked 'foreign
-- release'): a key holding another type (written by hand) holds no permit
-- and no waiting job, so there is nothing to release or wake, and an error
-- there would fail the call after its jobs' records were written, their
-- indexes not.

-- flow_release ends job id's permit or promise on limit key (its attempt
-- ended or its lease was reclaimed, or it was cancelled) and, when jobs wait,
-- wakes those the freed permits admit (flow_wake).
local function flow_release(id, key)
  local hk = limit_holders(key)
  local r = redis.pcall('ZREM', hk, id)
  if type(r) == 'table' then return end -- holders of another type (foreign release)
  if flow_waits(key) then
    flow_wake(key)
  elseif redis.call('EXISTS', hk) == 0 then
    -- nothing holds, is promised or waits: out of the limits hash (the
    -- zset went with its last member)
    redis.call('HDEL', P .. 'limits', key)
  end
end

-- flow_rem_later records that job id's permit on limit key ends with the
-- others of its key and call (one id as it is, more in a list).
local function flow_rem_later(key, id)
  local ids = limit_rem[key]
  if not ids then
    limit_rem[key] = id
  elseif type(ids) == 'string' then
    limit_rem[key] = {ids, id}
  else
    ids[#ids + 1] = id
  end
end

-- flow_forget drops from the limits hash the keys of list keys (nothing
-- waits on them) that nothing holds or is promised any more: one HMGET of
-- the hash per call (per 1000 keys), and one EXISTS only per key it has (a
-- key that parked jobs); a key that never parked one costs nothing more.
local function flow_forget(keys)
  local lk, gone = P .. 'limits', {}
  for c = 1, #keys, 1000 do
    local m = redis.call('HMGET', lk, unpack(keys, c, math.min(c + 999, #keys)))
    for j = 1, #m do
      local key = keys[c + j - 1]
      if m[j] and redis.call('EXISTS', limit_holders(key)) == 0 then gone[#gone + 1] = key end
    end
  end
  if gone[1] then call_chunked('HDEL', lk, gone, 1000) end
end

-- flow_release_later is flow_release for a script that only ends permits
-- (complete.lua): the releases of keys nothing waits on are written per key
-- and call by flow_release_flush, which the script calls before it returns,
-- and which looks at once at every key not looked at yet.
local function flow_release_later(id, key)
  local waits = limit_waits[key]
  if waits == false then return flow_rem_later(key, id) end
  local e = limit_later[key]
  if e then
    e[#e + 1] = id
  else
    limit_later[key] = {id}
    limit_later_keys[#limit_later_keys + 1] = key
  end
end

-- flow_release_flush ends the permits flow_release_later recorded: one
-- EXISTS of the wait zsets of every key met (within Lua's unpack limit);
-- when jobs wait on some, the keys are looked at alone until that many are
-- found, and a key with waiting jobs is released at once (flow_release
-- wakes them); the others' permits end with one ZREM per holders zset, and
-- their keys leave the limits hash when that was their last permit
-- (flow_forget).
local function flow_release_flush()
  local keys = limit_later_keys
  if keys[1] then
    local wk, any = {}, 0
    for j = 1, #keys do wk[j] = limit_waiting(keys[j]) end
    for c = 1, #wk, 1000 do any = any + redis.call('EXISTS', unpack(wk, c, math.min(c + 999, #wk))) end
    for _, key in ipairs(keys) do
      local e = limit_later[key]
      -- any counts the keys with waiting jobs not met yet: once it is 0,
      -- no key left has any
      local waits = any > 0 and flow_waits(key)
      if waits then any = any - 1 else limit_waits[key] = false end
      for j = 1, #e do
        if waits then
          flow_release(e[j], key)
        else
          flow_rem_later(key, e[j])
        end
      end
      limit_later[key] = nil
    end
    limit_later_keys = {}
  end
  local freed = {}
  for key, ids in pairs(limit_rem) do
    local hk = limit_holders(key)
    if type(ids) == 'string' then ids = {ids} end
    local ok = true
    for c = 1, #ids, 1000 do
      local r = redis.pcall('ZREM', hk, unpack(ids, c, math.min(c + 999, #ids)))
      ok = ok and type(r) ~= 'table'
    end
    limit_rem[key] = nil
    if ok then freed[#freed + 1] = key end -- else holders of another type (foreign release)
  end
  if freed[1] then flow_forget(freed) end
end

-- flow_unhold takes job id, deferred by rate key (its 'wait' is 'rate'), out
-- of the key's deferrals (it starts, or it was cancelled: it holds no later
-- start), and the key out of the rates hash when no deferral is left.
local function flow_unhold(id, key)
  local heldk = rate_held(key)
  local r = redis.pcall('ZREM', heldk, id)
  if type(r) == 'table' then return end -- deferrals of another type (foreign release)
  if redis.call('EXISTS', heldk) == 0 then redis.call('HDEL', P .. 'rates', key) end
end

-- flow_enqueue decides where a job of limit key, created now and due now,
-- goes: parked at once (true; counted in limit_waits, and in limit_parked)
-- when the permits are taken or promised (held, or due jobs of the key not
-- yet claimed) or jobs wait before it; else it
-- enters the due index (false), promised a permit (in the holders, scored 0).
-- A key with waiting jobs but nothing held or promised (which no release would
-- ever wake) wakes them instead, and the job parks behind those still waiting.
-- taken and waiting, when given, are the holders' count and whether jobs
-- wait, read by the caller before the job's first write (flow_pre).
local function flow_enqueue(id, key, max, taken, waiting)
  local hk = limit_holders(key)
  taken = taken or redis.call('ZCARD', hk)
  if taken >= num(max) and redis.call('ZCOUNT', hk, '(0', '+inf') == 0 then
    flow_drop_lost(hk) -- nothing holds a permit, so no release will come
    taken = redis.call('ZCARD', hk)
  end
  local wk = limit_waiting(key)
  if waiting == nil then waiting = redis.call('EXISTS', wk) == 1 end
  if waiting and taken == 0 then
    flow_wake(key)
    taken, waiting = redis.call('ZCARD', hk), redis.call('EXISTS', wk) == 1
  end
  if taken > 0 and (waiting or taken >= num(max)) then
    flow_park(id, key, max, now)
    limit_parked[id] = true
    tallied('limit_waits') -- as a claim's park counts (flow_admit)
    return true
  end
  redis.call('ZADD', hk, 0, id) -- promised
  limit_promised[id] = true
  return false
end

-- rate_keys_ok reports whether the keys of rate key rkey hold the types
-- flow control writes there, looked at once per call and key: one written
-- by hand would fail the claim after its first write, stranding the batch
-- it took off the due index. (A limit's keys are read with redis.pcall
-- where flow_admit first touches them.)
local rate_checked = {}
local function rate_keys_ok(rkey)
  if rate_checked[rkey] == nil then
    rate_checked[rkey] = not foreign('zset', {P .. 'rate:' .. rkey, rate_held(rkey)})
      and not foreign('string', {P .. 'rate-per:' .. rkey})
  end
  return rate_checked[rkey]
end

-- flow_pre reads what flow_enqueue reads of limit key key, for a job not
-- yet written: the holders' count and whether jobs wait, or nil when a key
-- of the limit holds another type (the job is then left out).
local function flow_pre(key)
  local taken = redis.pcall('ZCARD', limit_holders(key))
  if type(taken) == 'table' then return nil end
  local t = redis.call('TYPE', limit_waiting(key))['ok']
  if t ~= 'none' and t ~= 'zset' then return nil end
  return taken, t == 'zset'
end

-- flow_admit decides whether job id, due and already taken off the due index
-- by a claim, may start now; flow is its 'flow' field. It returns nil when
-- it may (its permit is taken and its start recorded); else why, for the
-- claim's reply: 'limit:<name>' (parked until a permit frees) or
-- 'rate:<name>' (back in the due index at the earliest start its rate
-- allows); or 'corrupt' when its flow fields are not a limit's or
-- a rate's (a record edited by hand), or 'corrupt_key' when a key of its
-- limit or rate holds another type, for the claim to
-- quarantine. Nothing is counted as an attempt.
local function flow_admit(id, flow)
  -- k (the job's key) is made only when it is written or read again
  local k, lkey, lmax, rkey, rmax, rper, wait, wait_at, hk, nlmax, nrmax, nper
  if flow_parse(flow) then -- a limit only or a rate only, not held back before: nothing more to read
    lkey, lmax, hk, rkey, rmax, rper = fp_lkey, fp_lmax, fp_hk, fp_rkey, fp_rmax, fp_rper
    if lkey then nlmax = fp_nmax else nrmax, nper = fp_nmax, fp_nper end
  else
    k = jobkey(id)
    local f = redis.call('HMGET', k, 'lkey', 'lmax', 'rkey', 'rmax', 'rper', 'wait', 'wait_at')
    lkey, lmax, rkey, rmax, rper, wait, wait_at = f[1], f[2], f[3], f[4], f[5], f[6], f[7]
    local digits = '^%d+$'
    if lkey and not (lmax and string.find(lmax, digits))
      or rkey and not (rmax and rper and string.find(rmax, digits) and string.find(rper, digits)) then
      return 'corrupt'
    end
    hk = lkey and limit_holders(lkey)
    nlmax, nrmax, nper = num(lmax), num(rmax), num(rper)
  end
  if rkey and not rate_keys_ok(rkey) then return 'corrupt_key' end
  if lkey and not limit_n[hk] then
    -- the permits held: promises (its own included) score 0 and do not count
    local c = redis.pcall('ZCOUNT', hk, '(0', '+inf')
    if type(c) == 'table' then return 'corrupt_key' end -- holds another type: nothing written yet
    limit_n[hk] = c
  end
  if lkey and limit_n[hk] >= nlmax then
    redis.call('ZREM', hk, id) -- its promise, if it had one
    if wait == 'rate' then
      -- due at its deferred start, it now waits for a permit, not for that
      -- start: out of the rate's deferrals, which would push later ones back
      flow_unhold(id, rkey)
      redis.call('HDEL', k, 'wait_at')
    end
    -- a waiting zset of another type: the job leaves its promise and
    -- deferral, for review
    -- parked in the order of creation (the claim does not read 'created'
    -- of the jobs it admits)
    local created = num(redis.call('HGET', k or jobkey(id), 'created'))
    if not flow_park(id, lkey, lmax, created) then return 'corrupt_key' end
    count('limit_waits')
    return 'limit:' .. flow_name(lkey)
  end
  local rk, per, n
  if rkey then
    local max = nrmax
    per = nper
    rk = P .. 'rate:' .. rkey
    n = rate_window(rk, rkey, per)
    local heldk = rate_held(rkey)
    if n >= max then
      -- No start lies a year ahead of the namespace's time, nor a deferral
      -- further than a period per job deferred (each job ahead takes at
      -- most a period: a long backlog of a slow rate lies years ahead):
      -- one scored so (edited by hand: +inf, 1e300) would defer every job
      -- under the key to a start that never comes (and +inf is no expiry
      -- time). Such entries are dropped, on this path alone, and the
      -- window counted again.
      local far = '(' .. fmt(now + 366 * 86400000)
      local farheld = '(' .. fmt(now + math.max(366 * 86400000, per * (redis.call('ZCARD', heldk) + 2)))
      if redis.call('ZREMRANGEBYSCORE', rk, far, '+inf') + redis.call('ZREMRANGEBYSCORE', heldk, farheld, '+inf') > 0 then
        rate_n[rk] = {}
        n = rate_window(rk, rkey, per)
      end
    end
    if n >= max then
      flow_flush(rk) -- the zset holds every start before it is read
      -- The earliest start: when the start max places from the newest leaves
      -- the window. Jobs deferred before it take the starts before it, max
      -- per period, so a backlog is spread out instead of all due at once.
      -- A job deferred before and held back again at its start (a start
      -- before it made late, by a claim after its due time, is still in
      -- the window) keeps its place: only the jobs deferred to earlier
      -- starts are ahead of it, not the ones deferred after it, so it is
      -- not sent behind the whole backlog (its start left unused, the
      -- backlog run out of order, and the same job held back again and
      -- again).
      redis.call('ZREMRANGEBYSCORE', heldk, '-inf', now - per)
      redis.call('ZREM', heldk, id)
      -- The jobs ahead take a period per max of them, unless they were
      -- deferred to earlier starts than that (by a faster rate of the key:
      -- a deployment lowered it while they waited): then it is due a
      -- period after the start max places from the last of theirs, not a
      -- period of its own rate per max of them (a day per job of a backlog
      -- a fast rate spread over seconds). The admission check is exact
      -- whatever the estimate.
      local ahead, last
      if wait == 'rate' and wait_at then
        ahead = redis.call('ZCOUNT', heldk, '-inf', '(' .. wait_at)
        last = redis.call('ZREVRANGEBYSCORE', heldk, '(' .. wait_at, '-inf', 'WITHSCORES', 'LIMIT', max - 1, 1)
      else
        ahead = redis.call('ZCARD', heldk)
        last = redis.call('ZRANGE', heldk, -max, -max, 'WITHSCORES')
      end
      local e = redis.call('ZRANGE', rk, -max, -max, 'WITHSCORES')
      local at = num(e[2]) + per + per * math.floor(ahead / max)
      if last[2] then at = math.min(at, math.max(num(e[2]), num(last[2])) + per) end
      redis.call('ZADD', heldk, at, id)
      local last = redis.call('ZRANGE', heldk, -1, -1, 'WITHSCORES')
      redis.call('PEXPIREAT', heldk, num(last[2]) + per + RATE_KEEP_MS)
      redis.call('ZADD', index['pending'], at, id)
      redis.call('HSET', k or jobkey(id), 'wait', 'rate', 'wait_at', fmt(at), 'flow', '1')
      redis.call('HSET', P .. 'rates', rkey, rmax .. '/' .. rper)
      if lkey then
        redis.call('ZREM', hk, id) -- no longer promised: not due
        flow_wake_freed(lkey, hk)
      end
      count('rate_deferrals')
      return 'rate:' .. flow_name(rkey)
    end
  end
  if lkey then
    local adds = limit_add[hk]
    if not adds then
      adds = {}
      limit_add[hk] = adds
    end
    adds[#adds + 1] = snow
    adds[#adds + 1] = id
    limit_n[hk] = limit_n[hk] + 1
    if wait == 'limit' then redis.pcall('ZREM', limit_waiting(lkey), id) end -- another type: nothing to take off
  end
  if rk then
    -- A key's starts and deferrals expire a period (and RATE_KEEP_MS) after the last of them,
    -- and its entry in the rates hash goes with its last deferred job (or,
    -- when that one was cancelled, with the first start after a quiet
    -- period): an idle key leaves nothing behind, and a start that was
    -- never deferred in a busy window costs no look at the deferrals.
    local adds = rate_add[rk]
    if not adds then
      adds = {}
      rate_add[rk], rate_per[rk] = adds, per
    elseif per > rate_per[rk] then
      rate_per[rk] = per
    end
    if not rate_suffix then rate_suffix = ':' .. fmt(now_us) end
    adds[#adds + 1] = snow
    adds[#adds + 1] = id .. rate_suffix
    for p, c in pairs(rate_n[rk]) do rate_n[rk][p] = c + 1 end -- in every period's window
    if wait == 'rate' then
      flow_unhold(id, rkey)
    elseif n == 0 and redis.call('EXISTS', rate_held(rkey)) == 0 then
      redis.call('HDEL', P .. 'rates', rkey)
    end
  end
  if wait then redis.call('HDEL', k, 'wait', 'wait_at') end
  return nil
end
