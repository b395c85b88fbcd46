/*
 * Default TVMCrtAotModel_Lookup for test programs that do not define their own (the runtime's
 * tvm.aot_executor.create refers to it). Linked from an archive, so a test's own definition wins.
 */
#include <stddef.h>
#include <tvm/runtime/crt/aot_model.h>

const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* module_name) {
  (void)module_name;
  return NULL;
}
