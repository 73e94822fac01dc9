// SPDX-License-Identifier: Apache-2.0
// tapeflow-enzyme-cache: an LLVM pass plugin that runs after Enzyme's pass (opt -passes=enzyme,
// tapeflow-enzyme-cache) and routes the memory Enzyme's split-mode code allocates for its caches
// into tapeflow's bounded per-slot cache pool instead of the heap (docs/enzyme.md).
//
// Enzyme stores values a loop of run-time trip count needs in its reverse in arrays it allocates in
// the augmented forward and frees in the reverse. It tags those calls: `malloc` with
// !enzyme_cache_alloc and `free` with !enzyme_cache_free; loops whose trip count is only known
// when they exit grow their arrays with `realloc` inside Enzyme's __enzyme_exponentialallocation.
// This pass rewrites
//     malloc(n)      !enzyme_cache_alloc   ->  tapeflow_enzyme_cache_alloc(n)
//     realloc(p, n)  in Enzyme's functions ->  tapeflow_enzyme_cache_realloc(p, n)
//     free(p)        !enzyme_cache_free    ->  tapeflow_enzyme_cache_free(p)
// and stops the build, naming the function and the call, when an allocation or free that it cannot
// route is left in a function Enzyme generated (for instance the shadow of a buffer the
// differentiated function allocates itself).
//
// A second pass, tapeflow-libdevice-math, lowers the math intrinsics Enzyme's derivatives use in
// device code (llvm.cos.f64 for the derivative of __nv_sin, ...), which LLVM 15's NVPTX backend
// cannot select, to libdevice's __nv_* functions; libdevice is linked after it.
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Passes/PassPlugin.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/raw_ostream.h>

#include <string>

using namespace llvm;

namespace {

/// Functions Enzyme creates in split mode (augmented forwards, reverses, its growth helper).
bool enzyme_generated(StringRef name)
{
  return name.startswith("augmented_") || name.startswith("fakeaugmented_") || name.startswith("diffe") ||
         name.startswith("__enzyme_exponentialallocation");
}

/// Allocation and deallocation functions tapeflow does not expect in Enzyme's code after routing.
bool heap_function(StringRef name)
{
  return name == "malloc" || name == "calloc" || name == "realloc" || name == "free" || name == "aligned_alloc" ||
         name == "posix_memalign" || name == "_Znwm" || name == "_Znam" || name == "_ZdlPv" || name == "_ZdaPv" ||
         name == "_ZdlPvm" || name == "_ZdaPvm";
}

std::string describe(Instruction const& call)
{
  std::string text;
  raw_string_ostream out(text);
  call.print(out);
  return StringRef(out.str()).trim().str();
}

/// llvm.<op>.f64/f32 -> __nv_<op> / __nv_<op>f for the operations NVPTX has no instruction for.
void lower_math_to_libdevice(Module& module)
{
  static constexpr char const* ops[] = {"sin", "cos", "exp", "exp2", "log", "log2", "log10", "pow"};
  SmallVector<CallInst*, 16> calls;
  for (Function& f : module) {
    if (!f.isIntrinsic()) { continue; }
    for (char const* op : ops) {
      for (char const* type : {"f64", "f32"}) {
        if (f.getName() != (Twine("llvm.") + op + "." + type).str()) { continue; }
        for (User* user : f.users()) {
          if (auto* call = dyn_cast<CallInst>(user)) { calls.push_back(call); }
        }
      }
    }
  }
  for (CallInst* call : calls) {
    Function* const intrinsic = call->getCalledFunction();
    StringRef const name = intrinsic->getName();  // llvm.<op>.<type>
    StringRef const op = name.drop_front(5).rsplit('.').first;
    bool const single = name.endswith(".f32");
    FunctionCallee const target =
      module.getOrInsertFunction((Twine("__nv_") + op + (single ? "f" : "")).str(), intrinsic->getFunctionType());
    SmallVector<Value*, 2> args(call->args());
    IRBuilder<> builder(call);
    CallInst* const lowered = builder.CreateCall(target, args);
    lowered->copyFastMathFlags(call);
    call->replaceAllUsesWith(lowered);
    call->eraseFromParent();
  }
}

struct libdevice_math : PassInfoMixin<libdevice_math> {
  PreservedAnalyses run(Module& module, ModuleAnalysisManager&)
  {
    lower_math_to_libdevice(module);
    return PreservedAnalyses::none();
  }
};

struct cache_routing : PassInfoMixin<cache_routing> {
  PreservedAnalyses run(Module& module, ModuleAnalysisManager&)
  {
    LLVMContext& context = module.getContext();
    Type* size = module.getDataLayout().getIntPtrType(context);
    PointerType* pointer = PointerType::getUnqual(Type::getInt8Ty(context));
    FunctionCallee const alloc =
      module.getOrInsertFunction("tapeflow_enzyme_cache_alloc", FunctionType::get(pointer, {size}, false));
    FunctionCallee const grow =
      module.getOrInsertFunction("tapeflow_enzyme_cache_realloc", FunctionType::get(pointer, {pointer, size}, false));
    FunctionCallee const release = module.getOrInsertFunction(
      "tapeflow_enzyme_cache_free", FunctionType::get(Type::getVoidTy(context), {pointer}, false));

    SmallVector<std::pair<CallInst*, FunctionCallee>, 16> routes;
    for (Function& f : module) {
      bool const generated = enzyme_generated(f.getName());
      for (BasicBlock& block : f) {
        for (Instruction& inst : block) {
          auto* call = dyn_cast<CallInst>(&inst);
          Function* callee = call ? call->getCalledFunction() : nullptr;
          if (callee == nullptr) { continue; }
          StringRef const name = callee->getName();
          if (name == "malloc" && call->getMetadata("enzyme_cache_alloc") != nullptr) {
            routes.emplace_back(call, alloc);
          } else if (name == "free" && call->getMetadata("enzyme_cache_free") != nullptr) {
            routes.emplace_back(call, release);
          } else if (name == "realloc" && generated) {
            routes.emplace_back(call, grow);
          }
        }
      }
    }

    for (auto& [call, target] : routes) {
      IRBuilder<> builder(call);
      SmallVector<Value*, 2> args;
      FunctionType* const type = target.getFunctionType();
      for (unsigned i = 0; i < call->arg_size(); ++i) {
        args.push_back(builder.CreateBitOrPointerCast(call->getArgOperand(i), type->getParamType(i)));
      }
      CallInst* const routed = builder.CreateCall(target, args);
      if (!call->getType()->isVoidTy()) {
        call->replaceAllUsesWith(builder.CreateBitOrPointerCast(routed, call->getType()));
      }
      call->eraseFromParent();
    }

    std::string unrouted;
    for (Function& f : module) {
      if (!enzyme_generated(f.getName())) { continue; }
      for (BasicBlock& block : f) {
        for (Instruction& inst : block) {
          auto* call = dyn_cast<CallBase>(&inst);
          Function* callee = call ? call->getCalledFunction() : nullptr;
          if (callee != nullptr && heap_function(callee->getName())) {
            unrouted += "\n  in " + f.getName().str() + ": " + describe(inst);
          }
        }
      }
    }
    if (!unrouted.empty()) {
      report_fatal_error(Twine("tapeflow-enzyme-cache: Enzyme's generated code allocates heap memory that is not one of "
                               "its tagged cache allocations, so tapeflow cannot route it into the cache pool:") +
                           unrouted +
                           "\n(allocate such buffers outside the differentiated function, or on the stack; see "
                           "docs/enzyme.md)",
                         false);
    }
    return routes.empty() ? PreservedAnalyses::all() : PreservedAnalyses::none();
  }
};

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo()
{
  return {LLVM_PLUGIN_API_VERSION, "tapeflow-enzyme-cache", "0.1", [](PassBuilder& builder) {
            builder.registerPipelineParsingCallback(
              [](StringRef name, ModulePassManager& passes, ArrayRef<PassBuilder::PipelineElement>) {
                if (name == "tapeflow-enzyme-cache") {
                  passes.addPass(cache_routing{});
                  return true;
                }
                if (name == "tapeflow-libdevice-math") {
                  passes.addPass(libdevice_math{});
                  return true;
                }
                return false;
              });
          }};
}
