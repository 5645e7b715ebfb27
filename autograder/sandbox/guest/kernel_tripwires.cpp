// The aten kernel tripwires, registered from C++ so that no Python object leads to them.
//
// `install(plan, report)` overrides each built-in kernel of the families (`plan`: (namespace, op, dispatch
// key) triples from `tripwires.aten_plan()`) by one that calls `report(op_name)`, which records the use
// and raises the error the student sees; the kernel throws that error, or its own if `report` returns.  The dispatcher libraries that hold the registrations are C++ objects that are never freed and
// never exposed: Python code has no handle with which to deregister them (no `reset()`, no destructor),
// so the built-in kernels beneath stay out of reach for the runner's whole life.  `report` only records
// and words the error; replacing it changes neither that the kernel throws nor what it computes (nothing).
//
// Built on the trusted side against the installed torch (``autograder/sandbox/kernel_tripwires.py``) and
// mounted read-only into the sandbox with the other guest files.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/csrc/Exceptions.h>
#include <torch/library.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>

namespace {

PyObject* report = nullptr;  // a strong reference, never released
bool installed = false;

// What the runner's look after each request compares (`tripwires.cover_late_ops`): ops registered, and
// modules imported, since `install`.  Kept here, where no Python code can reset them: an op registered by
// a module imported and then dropped from sys.modules still counts.
std::atomic<long> ops_registered{0};
std::atomic<long> imports{0};

struct CountOps : c10::OpRegistrationListener {
  void onOperatorRegistered(const c10::OperatorHandle& /*op*/) override { ops_registered.fetch_add(1); }
  void onOperatorDeregistered(const c10::OperatorHandle& /*op*/) override {}
};

int count_imports(const char* event, PyObject* /*args*/, void* /*data*/) {
  if (std::strcmp(event, "import") == 0) {
    imports.fetch_add(1);
  }
  return 0;
}

// The dispatcher warns once that a kernel is overridden: that is the point here, so it is not shown.
struct Quiet : c10::WarningHandler {
  void process(const c10::Warning& /*warning*/) override {}
};

void tripwire(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  const std::string name = op.schema().name();
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* said = PyObject_CallFunction(report, "s", name.c_str());
  if (said == nullptr) {  // `report` raised (ForbiddenAPIError, worded): that is the error the caller sees
    python_error error;
    error.persist();
    PyGILState_Release(gil);
    throw error;
  }
  Py_DECREF(said);
  PyGILState_Release(gil);
  TORCH_CHECK(false, "forbidden kernel: ", name);  // `report` returned instead of raising: still no result
}

std::map<std::string, torch::Library*>* libraries = nullptr;  // one per namespace; each leaked on purpose

// Overrides each (namespace, op, key) of `plan` by the tripwire; returns the triples registered.
PyObject* register_plan(PyObject* plan) {
  PyObject* items = PySequence_Fast(plan, "plan must be a sequence of (namespace, op, key)");
  if (items == nullptr) {
    return nullptr;
  }
  Quiet quiet;
  c10::WarningUtils::WarningHandlerGuard quietly(&quiet);
  PyObject* registered = PyList_New(0);
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); ++i) {
    const char* ns = nullptr;
    const char* name = nullptr;
    const char* key = nullptr;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "sss", &ns, &name, &key)) {
      Py_DECREF(items);
      Py_DECREF(registered);
      return nullptr;
    }
    try {
      torch::Library*& library = (*libraries)[ns];
      if (library == nullptr) {
        library = new torch::Library(torch::Library::IMPL, ns, std::nullopt, __FILE__, __LINE__);
      }
      library->impl(name, torch::dispatch(c10::parseDispatchKey(key),
                                          torch::CppFunction::makeFromBoxedFunction<&tripwire>()));
      PyObject* done = Py_BuildValue("(sss)", ns, name, key);
      PyList_Append(registered, done);
      Py_XDECREF(done);
    } catch (const std::exception&) {
      // An op or a key this build lacks: nothing to override there.
    }
  }
  Py_DECREF(items);
  return registered;
}

PyObject* install(PyObject* /*module*/, PyObject* args) {
  PyObject* plan = nullptr;
  PyObject* reporter = nullptr;
  if (!PyArg_ParseTuple(args, "OO", &plan, &reporter)) {
    return nullptr;
  }
  if (installed) {
    PyErr_SetString(PyExc_RuntimeError, "the kernel tripwires are installed already");
    return nullptr;
  }
  if (!PyCallable_Check(reporter)) {
    PyErr_SetString(PyExc_TypeError, "report must be callable");
    return nullptr;
  }
  Py_INCREF(reporter);
  report = reporter;
  installed = true;
  libraries = new std::map<std::string, torch::Library*>();
  // Leaked, as the libraries are: the listener stays for the process's life.
  new c10::RegistrationHandleRAII(c10::Dispatcher::singleton().addRegistrationListener(std::make_unique<CountOps>()));
  if (PySys_AddAuditHook(count_imports, nullptr) < 0) {
    return nullptr;
  }
  return register_plan(plan);
}

// (ops registered, modules imported) since the process started counting: only ever growing.
PyObject* counts(PyObject* /*module*/, PyObject* /*args*/) {
  return Py_BuildValue("(ll)", ops_registered.load(), imports.load());
}

// More tripwires, for ops of the families registered after `install` (a module imported later): it only
// ever adds kernels that throw, so it needs no guarding.
PyObject* extend(PyObject* /*module*/, PyObject* args) {
  PyObject* plan = nullptr;
  if (!PyArg_ParseTuple(args, "O", &plan)) {
    return nullptr;
  }
  if (!installed) {
    PyErr_SetString(PyExc_RuntimeError, "the kernel tripwires are not installed yet");
    return nullptr;
  }
  return register_plan(plan);
}

PyMethodDef methods[] = {
    {"install", install, METH_VARARGS,
     "install(plan, report) -> registered: override each (namespace, op, key) kernel by one that throws, "
     "for good; returns the triples registered."},
    {"extend", extend, METH_VARARGS,
     "extend(plan) -> registered: the same for ops registered after install."},
    {"counts", counts, METH_NOARGS, "counts() -> (ops registered, modules imported), counted since install."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "kernel_tripwires",
                      "Built-in softmax and attention kernels that throw, registered from C++.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_kernel_tripwires(void) { return PyModule_Create(&module); }
