// InterposerMounts: the node side of the in-container library's contract
// (core/interposer_contract.h): for each container Allocate admits with a memory or SM limit, a
// fresh directory <container_state_dir>/<id>/ holding
//     config          the library's configuration (mounted read-only at /etc/gpushare/config)
//     ld.so.preload   loads the library into every process (mounted at /etc/ld.so.preload)
//     shared/         the per-container accounting region (mounted read-write, world-writable
//                     so every user of the container shares it)
// plus the library itself from gpushare.interposerHostDir. Kubelet's Allocate carries no pod
// identity, so <id> is unique per call (time, pid, counter); kubelet reuses the answer for a
// restarted container, so a restart keeps its directory and the region is reinitialised by
// its first process. Files are written to a temporary name and renamed, so a crash never leaves
// a half-written config. Before ld.so.preload (the last file) an `allocation` marker
// (core/library_gc.h: the resource, the device IDs, the library directory mounted) is written,
// so that node/library_gc.h can tell when kubelet no longer allocates those devices and the
// directory, and the library version it names, can go.
#pragma once

#include <memory>
#include <string>

#include "core/interposer_contract.h"
#include "core/library_gc.h"
#include "core/node_config.h"
#include "core/status.h"
#include "deviceplugin/allocation.h"
#include "node/agent.h"
#include "node/library_gc.h"

namespace gpushare::node {

struct InterposerMountOptions {
  std::string library_host_dir;  // gpushare.interposerHostDir; empty = the library is not used
  std::string state_dir;         // gpushare.stateDir
};

// Creates the container's directory and files and returns the setup with host paths filled in.
// Nothing to enforce: an empty setup and no files. Errors name the path and the reason.
// `allocation` names the resource and device IDs for the marker (library_dir is filled in).
Result<InterposerSetup> PrepareInterposer(const std::vector<InterposerDevice>& devices,
                                          const InterposerMountOptions& options,
                                          const AllocationMarker& allocation = {});

// The Allocate decorator: adds the contract's environment and mounts to the answer.
deviceplugin::AllocationDecorator MakeInterposerDecorator(const InterposerMountOptions& options);

// For node::ServeOptions::decorator: builds the decorator from each loaded config; no
// decorator when gpushare.interposer.hostDir is empty. With a library_source (gpushare-node
// --interposer-library: the library its image ships), each config's hostDir first gets that
// library installed at its versioned path (node/library_install.h), and Allocate mounts that
// file; if the install fails, Allocate of a container that needs limits fails with the reason.
// With `paths`, every load records its stateDir, hostDir and installed version there (what the
// collection of node/library_gc.h works from).
DecoratorFactory InterposerDecoratorFactory(std::string library_source = "",
                                            std::string version = "",
                                            std::shared_ptr<InterposerPaths> paths = nullptr);

}  // namespace gpushare::node
