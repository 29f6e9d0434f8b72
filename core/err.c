#include "core/err.h"

#include <errno.h>
#include <string.h>

static const struct {
    int code;
    const char *name;
    const char *text;
} tm_errs[] = {
    {TM_EINVAL, "TM_EINVAL", "invalid input"},
    {TM_ETHROTTLED, "TM_ETHROTTLED", "request throttled"},
    {TM_EQUOTA, "TM_EQUOTA", "capacity or quota exhausted"},
    {TM_EAUTH, "TM_EAUTH", "authentication failed"},
    {TM_EBADREPLY, "TM_EBADREPLY", "malformed reply"},
    {TM_EDB, "TM_EDB", "database error"},
    {TM_ENOTFOUND, "TM_ENOTFOUND", "not found"},
    {TM_ECONFLICT, "TM_ECONFLICT", "conflicting change"},
    {TM_ENOTLEADER, "TM_ENOTLEADER", "not the leader"},
    {TM_ESCHEMA, "TM_ESCHEMA", "database schema version mismatch"},
    {TM_EUNAVAIL, "TM_EUNAVAIL", "service unavailable"},
    {TM_ENOMEM, "TM_ENOMEM", "out of memory"},
    {TM_EBUDGET, "TM_EBUDGET", "budget cap would be exceeded"},
    {TM_ECANCELED, "TM_ECANCELED", "operation canceled"},
};

const char *tm_strerror(int err)
{
    if (err >= 0)
        return "success";
    for (size_t i = 0; i < sizeof(tm_errs) / sizeof(tm_errs[0]); i++)
        if (tm_errs[i].code == err)
            return tm_errs[i].text;
    if (err > TM_ERR_BASE)
        return strerror(-err);
    return "unrecognized error";
}

const char *tm_err_name(int err)
{
    for (size_t i = 0; i < sizeof(tm_errs) / sizeof(tm_errs[0]); i++)
        if (tm_errs[i].code == err)
            return tm_errs[i].name;
    switch (-err) {
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOENT: return "ENOENT";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EIO: return "EIO";
    default: return "EUNKNOWN";
    }
}

bool tm_err_retryable(int err)
{
    switch (err) {
    case TM_ETHROTTLED:
    case TM_EUNAVAIL:
    case TM_ECONFLICT:
    case TM_EDB:
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -ETIMEDOUT:
    case -EAGAIN:
    case -EIO:
        return true;
    default:
        return false;
    }
}
