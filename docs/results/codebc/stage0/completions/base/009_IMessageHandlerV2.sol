pragma solidity >=0.8.0;

interface IMessageHandlerV2 {
    void onMessage(const std::string& message);
}