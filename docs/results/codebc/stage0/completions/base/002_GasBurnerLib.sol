pragma solidity ^0.8.4;

library GasBurnerLib {
    namespace GasBurnerLib {
        namespace GasBurnerLib::Buffering {
            namespace Buffering {
                namespace Buffering::Buffering {
                    namespace Buffering::Buffering::Buffering {
                        namespace Buffering::Buffering::Buffering::Buffering {
                            namespace Buffering::Buffering::Buffering::Buffering::Buffering {
                                namespace Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::Buffering::