/* dga.lock(path) -> a held lock on path (core/lock.h): an existing directory itself, else a
 * lock file removed at release; or an error naming the process that holds it.
 *
 *   local lock <close> = dga.lock(dir)                -- released at the end of the scope
 *   local lock <close> = dga.lock(out .. ".lock")     -- an output that does not exist yet
 *   lock:release()                                    -- or explicitly; idempotent
 *   lock:check()                                      -- errors if the lock file was deleted
 *
 * As in liolib, the userdata is created closed first, so an error while acquiring leaves
 * nothing for __gc to release. */
#include "dgal.h"
#include "lock.h"

#define DGAL_LOCK "dga.lock"

static int l_lock(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dgal_box *box = dgal_box_new(L, DGAL_LOCK, 0);
    dga_lock *lock;
    DGAL_CHECK(L, dga_lock_acquire(path, &lock));
    box->p = lock;
    return 1;
}

static int lock_release(lua_State *L)
{
    dga_lock_release(dgal_box_take(L, 1, DGAL_LOCK));
    return 0;
}

static int lock_held(lua_State *L)
{
    lua_pushboolean(L, dgal_box_get(L, 1, DGAL_LOCK) != NULL);
    return 1;
}

static int lock_check(lua_State *L)
{
    dga_lock *lock = dgal_box_get(L, 1, DGAL_LOCK);
    if (!lock) return luaL_error(L, "lock:check: the lock was released");
    DGAL_CHECK(L, dga_lock_check(lock));
    lua_settop(L, 1);
    return 1;
}

static int lock_tostring(lua_State *L)
{
    dga_lock *lock = dgal_box_get(L, 1, DGAL_LOCK);
    if (lock)
        lua_pushfstring(L, "dga.lock (%s)", dga_lock_path(lock));
    else
        lua_pushliteral(L, "dga.lock (released)");
    return 1;
}

void dgal_open_lock(lua_State *L)
{
    static const luaL_Reg methods[] = {{"release", lock_release}, {"held", lock_held},
                                       {"check", lock_check}, {NULL, NULL}};
    static const luaL_Reg meta[] = {
        {"__gc", lock_release}, {"__close", lock_release}, {"__tostring", lock_tostring}, {NULL, NULL},
    };
    dgal_new_class(L, DGAL_LOCK, methods, meta);
    lua_pushcfunction(L, l_lock);
    lua_setfield(L, -2, "lock");
}
